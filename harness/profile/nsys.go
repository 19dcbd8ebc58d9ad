package profile

import (
	"context"
	"fmt"
	"net/url"
	"os/exec"
	"strconv"
	"time"

	"github.com/roseinfer/roseinfer/harness/backend"
)

// nsysReportSuffix is the extension nsys gives its report.
const nsysReportSuffix = ".nsys-rep"

// nsysArgv is the wrapper the server command is appended to:
//
//	nsys profile --force-overwrite=true --capture-range=none --trace=T
//	--cuda-graph-trace=G [--kill=K] [--cuda-flush-interval=MS] [--cpuctxsw=C]
//	--sample=none --trace-fork-before-exec=true -o PREFIX
//
// Capture starts with the process (capture-range none), so worker
// processes a server spawns early are not missed; fork tracing follows them.
func nsysArgv(o *Options, prefix string) []string {
	argv := []string{o.NsysBin, "profile", "--force-overwrite=true", "--capture-range=none",
		"--trace=" + o.NsysTrace, "--cuda-graph-trace=" + o.NsysCUDAGraphTrace}
	if o.NsysKill != "" {
		argv = append(argv, "--kill="+o.NsysKill)
	}
	if o.NsysCUDAFlushIntervalMs > 0 {
		argv = append(argv, "--cuda-flush-interval="+strconv.Itoa(o.NsysCUDAFlushIntervalMs))
	}
	if o.NsysCPUCtxSw != "" {
		argv = append(argv, "--cpuctxsw="+o.NsysCPUCtxSw)
	}
	return append(argv, "--sample=none", "--trace-fork-before-exec=true", "-o", prefix)
}

// nsysOfflineArgv is the offline stage's wrapper: a fixed trace set,
// no CUDA-graph option.
func nsysOfflineArgv(o *Options, prefix string) []string {
	argv := []string{o.NsysBin, "profile", "--force-overwrite=true", "--capture-range=none", "--trace=cuda,nvtx,osrt"}
	if o.NsysCUDAFlushIntervalMs > 0 {
		argv = append(argv, "--cuda-flush-interval="+strconv.Itoa(o.NsysCUDAFlushIntervalMs))
	}
	return append(argv, "--sample=none", "--trace-fork-before-exec=true", "-o", prefix)
}

// checkNsys fails early, with a clear message, when nsys cannot be run.
func checkNsys(bin string) error {
	if _, err := exec.LookPath(bin); err != nil {
		return fmt.Errorf("nsys not available (--profile-nsys-bin %s): %w", bin, err)
	}
	return nil
}

// stopUnderNsys stops a server running under nsys so that nsys finalises
// its report: the server (found by its listening port, plus a process
// whose command line holds marker, with their children) gets SIGTERM and
// up to w.ServerStop before SIGKILL; then nsys, which exits once its target
// is gone, gets nsysExit to write the report; whatever is left of the
// process group is stopped last. Signalling the whole group at once would
// stop nsys before its target and lose the report.
func stopUnderNsys(srv *backend.Server, marker string, w waits, nsysExit time.Duration) {
	if u, err := url.Parse(srv.BaseURL); err == nil {
		if port, err := strconv.Atoi(u.Port()); err == nil {
			backend.StopByPort(port, marker, w.ServerStop)
		}
	}
	select {
	case <-srv.Exited():
	case <-time.After(nsysExit):
	}
	srv.Stop()
}

// waitForReport waits for nsys's report file.
func waitForReport(ctx context.Context, prefix string, timeout time.Duration) (string, bool) {
	path := prefix + nsysReportSuffix
	return path, waitForFile(ctx, path, timeout)
}
