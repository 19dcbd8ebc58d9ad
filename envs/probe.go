package envs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// probeMarker starts the probe's result line (probe.py PROBE_MARKER).
const probeMarker = "ROSEINFER_PROBE "

// Probe is what probe.py found inside one environment.
type Probe struct {
	PythonVersion    string     `json:"python_version"`
	PythonExecutable string     `json:"python_executable"`
	Module           string     `json:"module"`
	Found            bool       `json:"found"`
	Version          *string    `json:"version"` // the backend's distribution
	Torch            *string    `json:"torch"`
	Transformers     *string    `json:"transformers"`
	ImportOK         *bool      `json:"import_ok"` // nil: not attempted
	ImportError      *string    `json:"import_error"`
	ImportS          *float64   `json:"import_s"`
	CUDA             *CUDAProbe `json:"cuda"` // nil: not attempted
}

// CUDAProbe is torch's view of the GPUs from inside the environment.
type CUDAProbe struct {
	Available   bool     `json:"available"`
	DeviceCount int      `json:"device_count"`
	Devices     []string `json:"devices"`
	TorchCUDA   *string  `json:"torch_cuda"`
	Error       *string  `json:"error"`
}

// ProbeOptions choose how deep a probe goes.
type ProbeOptions struct {
	Import  bool // import the module (slow: seconds to a minute)
	CUDA    bool // import torch and ask for CUDA devices
	Timeout time.Duration
	// Env is added to the harness's environment (ProcessEnv plus, for a
	// run, CUDA_VISIBLE_DEVICES).
	Env map[string]string
}

// RunProbe runs probe.py with python. Without an import the probe reads
// installed-package metadata only and takes well under a second; the
// timeout (default 15 s, as the original's version probe) bounds a hung
// interpreter.
func RunProbe(ctx context.Context, b Backend, python string, o ProbeOptions) (*Probe, error) {
	if o.Timeout <= 0 {
		o.Timeout = 15 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	args := []string{"-c", ProbeScript(), "--module", b.Module, "--dist", b.Dist, "--torch-dist", b.TorchDist}
	if o.Import {
		args = append(args, "--import")
	}
	if o.CUDA {
		args = append(args, "--cuda")
	}
	cmd := exec.CommandContext(ctx, python, args...)
	cmd.Env = MergeEnv(os.Environ(), o.Env)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return nil, fmt.Errorf("probe of %s timed out after %v", python, o.Timeout)
	}
	p, perr := parseProbe(stdout.Bytes())
	if perr != nil {
		if err != nil {
			return nil, fmt.Errorf("probe of %s: %v%s", python, err, tail(stderr.String(), 5))
		}
		return nil, fmt.Errorf("probe of %s: %w", python, perr)
	}
	return p, nil
}

// parseProbe takes the last marker line of the probe's stdout.
func parseProbe(stdout []byte) (*Probe, error) {
	lines := strings.Split(string(stdout), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		rest, ok := strings.CutPrefix(strings.TrimRight(lines[i], "\r"), probeMarker)
		if !ok {
			continue
		}
		var p Probe
		if err := json.Unmarshal([]byte(rest), &p); err != nil {
			return nil, fmt.Errorf("probe output: %w", err)
		}
		return &p, nil
	}
	return nil, errors.New("probe printed no result line")
}

// MergeEnv applies overrides to base (KEY=VALUE lists); an override
// replaces every earlier value of its key.
func MergeEnv(base []string, overrides map[string]string) []string {
	out := make([]string, 0, len(base)+len(overrides))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := overrides[k]; !ok {
			out = append(out, kv)
		}
	}
	for _, k := range sortedKeys(overrides) {
		out = append(out, k+"="+overrides[k])
	}
	return out
}

// tail returns the last n non-empty lines of s, prefixed with a newline.
func tail(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return ""
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "\n" + strings.Join(lines, "\n")
}

// Versions are the meta.versions keys of one backend in the original's
// names (E.2): "<dist>" (vllm, sglang, tensorrt_llm), "<name>_python" (the
// interpreter path), "<name>_python_version", plus our additions
// "<name>_torch" and "<name>_transformers".
func Versions(b Backend, python string, p *Probe) map[string]string {
	v := map[string]string{b.Name + "_python": python}
	if p == nil {
		return v
	}
	v[b.Dist] = "not installed"
	if p.Version != nil {
		v[b.Dist] = *p.Version
	}
	v[b.Name+"_python_version"] = p.PythonVersion
	if p.Torch != nil {
		v[b.Name+"_torch"] = *p.Torch
	}
	if p.Transformers != nil {
		v[b.Name+"_transformers"] = *p.Transformers
	}
	return v
}
