// Package rundir owns what every run records about itself: the directory
// it writes into (<parent>/<kind>_<YYYYmmdd_HHMMSS>), the format of its
// start and end times, and the versions in meta.versions. The online and
// offline runners and the profile stage all use it; it imports no runner.
package rundir

import (
	"context"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/roseinfer/roseinfer/harness/backend"
)

// TimeFormat is the original's format of every *_time in meta (run, backend
// and profile start and end): local ISO-8601 with offset, seconds precision.
const TimeFormat = "2006-01-02T15:04:05-07:00"

// Versions returns meta.versions: the Go toolchain, the source revision,
// and the GPU's name and driver when nvidia-smi answers. Each backend's
// probed version is added under its label by the caller.
func Versions(ctx context.Context) map[string]any {
	v := map[string]any{"go": runtime.Version()}
	if rev := gitRev(ctx); rev != "" {
		v["git_rev"] = rev
	}
	if name, driver := gpuInfo(ctx); name != "" {
		v["gpu_name"] = name
		v["gpu_driver"] = driver
	}
	return v
}

// gitRev is the short revision the binary was built from (Go stamps it into
// builds inside a git checkout), else what git says about the source tree,
// "+dirty" marking uncommitted changes.
func gitRev(ctx context.Context) string {
	if info, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", false
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if rev != "" {
			if len(rev) > 12 {
				rev = rev[:12]
			}
			if dirty {
				rev += "+dirty"
			}
			return rev
		}
	}
	root, err := backend.ModuleRoot()
	if err != nil {
		return ""
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, "git", "rev-parse", "--short=12", "HEAD")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// gpuInfo asks nvidia-smi for the first GPU's name and driver version.
func gpuInfo(ctx context.Context) (name, driver string) {
	path, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return "", ""
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, path, "--query-gpu=name,driver_version", "--format=csv,noheader").Output()
	if err != nil {
		return "", ""
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	name, driver, _ = strings.Cut(line, ",")
	return strings.TrimSpace(name), strings.TrimSpace(driver)
}
