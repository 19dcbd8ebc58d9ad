package backend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/roseinfer/roseinfer/harness/client"
)

// RoseinferOptions configure a roseinfer run spec.
type RoseinferOptions struct {
	Binary string // path of the roseinfer executable (see FindRoseinfer)
	Label  string // default "roseinfer"
	Device string // --device: cpu, sim, cuda, auto
	Model  string // --model: an HF checkpoint directory; "" = the built-in tiny model
	// Flags are passed to `roseinfer serve` after the harness's own, so a
	// variant's flags override the common ones.
	Flags []string
	Env   map[string]string
	// APIKey, when set, is passed as --api-key and required of every
	// request (Spec.APIKey).
	APIKey string
}

// Roseinfer is the spec of a roseinfer server:
// `roseinfer serve --host H --port P --device D [--model M] [--api-key K] FLAGS...`.
func Roseinfer(o RoseinferOptions) Spec {
	label := o.Label
	if label == "" {
		label = "roseinfer"
	}
	bin, device, model, key := o.Binary, o.Device, o.Model, o.APIKey
	flags := append([]string(nil), o.Flags...)
	return Spec{
		Label: label,
		Command: func(host string, port int) []string {
			argv := []string{bin, "serve", "--host", host, "--port", strconv.Itoa(port)}
			if device != "" {
				argv = append(argv, "--device", device)
			}
			if model != "" {
				argv = append(argv, "--model", model)
			}
			if key != "" {
				argv = append(argv, "--api-key", key)
			}
			return append(argv, flags...)
		},
		APIKey:          key,
		Env:             o.Env,
		Ready:           DefaultReady,
		Quirks:          client.Roseinfer,
		ModelFromServer: true,
		StopGrace:       10 * time.Second,
		Version: func(ctx context.Context) string {
			return ProbeVersion(ctx, bin)
		},
	}
}

// ParseVariant splits a --variant value "LABEL=FLAGS" into the run label
// roseinfer+LABEL and the flags (split on white space, with '...' and "..."
// quoting).
func ParseVariant(s string) (label string, flags []string, err error) {
	name, rest, ok := strings.Cut(s, "=")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return "", nil, fmt.Errorf("variant %q: want LABEL=FLAGS, e.g. nocache=--no-prefix-cache", s)
	}
	if strings.ContainsAny(name, "+/ \t") {
		return "", nil, fmt.Errorf("variant %q: label must not contain '+', '/' or spaces", s)
	}
	flags, err = SplitArgs(rest)
	if err != nil {
		return "", nil, fmt.Errorf("variant %q: %w", s, err)
	}
	return "roseinfer+" + name, flags, nil
}

// SplitArgs splits a flag string on white space, honouring single and double
// quotes (no escapes inside single quotes, \" and \\ inside double quotes).
func SplitArgs(s string) ([]string, error) {
	var args []string
	var cur strings.Builder
	inArg := false
	var quote rune
	escaped := false
	for _, r := range s {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case quote == '"' && r == '\\':
			escaped = true
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inArg = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inArg {
				args = append(args, cur.String())
				cur.Reset()
				inArg = false
			}
		default:
			cur.WriteRune(r)
			inArg = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote", quote)
	}
	if inArg {
		args = append(args, cur.String())
	}
	return args, nil
}

// ProbeVersion runs `bin version` (then `bin --version`) and returns the
// first line of its output, or "" when neither works within 10 s.
func ProbeVersion(ctx context.Context, bin string) string {
	for _, arg := range []string{"version", "--version"} {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		out, err := exec.CommandContext(pctx, bin, arg).Output()
		cancel()
		if err == nil {
			line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
			if line != "" {
				return line
			}
		}
	}
	return ""
}

// FindRoseinfer locates the roseinfer executable: $ROSEINFER_BIN, then next
// to the running executable (make build puts bench and roseinfer in bin/),
// then $PATH, and last builds it with `go build` from the module source
// into the user cache directory.
func FindRoseinfer(ctx context.Context) (string, error) {
	if p := os.Getenv("ROSEINFER_BIN"); p != "" {
		if isExecutable(p) {
			return p, nil
		}
		return "", fmt.Errorf("ROSEINFER_BIN=%s is not an executable file", p)
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "roseinfer")
		if isExecutable(p) {
			return p, nil
		}
	}
	if p, err := exec.LookPath("roseinfer"); err == nil {
		return p, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", fmt.Errorf("roseinfer not found next to bench or in PATH, and cannot build it: %w", err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	return BuildRoseinfer(ctx, root, filepath.Join(cache, "roseinfer-bench"))
}

// BuildRoseinfer runs `go build -o outDir/roseinfer ./cmd/roseinfer` in the
// module root and returns the binary's path. Go's build cache makes a
// rebuild of unchanged sources quick.
func BuildRoseinfer(ctx context.Context, moduleRoot, outDir string) (string, error) {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(outDir, "roseinfer")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/roseinfer")
	cmd.Dir = moduleRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/roseinfer in %s: %w\n%s", moduleRoot, err, stderr.Bytes())
	}
	return out, nil
}

// ModuleRoot finds the roseinfer module's source tree: the first directory
// holding its go.mod, walking up from the working directory and then from
// the running executable.
func ModuleRoot() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, dir := range starts {
		for {
			data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
			if err == nil && bytes.Contains(data, []byte("module github.com/roseinfer/roseinfer\n")) {
				return dir, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", errors.New("the roseinfer module source (go.mod) is not above the working directory or the executable")
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
