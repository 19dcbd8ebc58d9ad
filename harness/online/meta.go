package online

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

// onlineMeta is meta of online_results.json: the original's keys where they
// apply (E.2), then additions.
func onlineMeta(o *OnlineOptions, w *Workload, labels []string) map[string]any {
	var maxIn any
	if o.MaxInputLen > 0 {
		maxIn = o.MaxInputLen
	}
	model := o.Model
	if model == "" {
		model = "gpt2"
		if o.BaseURL == "" {
			model = "roseinfer built-in tiny (GPT-2 vocabulary, random weights)"
		}
	}
	return map[string]any{
		"model":                  model,
		"device":                 o.Device,
		"gpu":                    o.GPU,
		"seed":                   o.Seed,
		"temperature":            o.Temperature,
		"top_p":                  o.TopP,
		"top_k":                  o.TopK,
		"ignore_eos":             o.IgnoreEOS,
		"n":                      o.N,
		"scales":                 o.Scales,
		"max_output_len":         o.MaxOutputLen,
		"max_input_len":          maxIn,
		"prompt_overhead_tokens": o.PromptOverheadTokens,
		"start_offset_s":         o.StartOffsetS,
		"warmup_requests":        o.WarmupRequests,
		"warmup_input_len":       o.WarmupInputLen,
		"warmup_output_len":      o.WarmupOutputLen,
		"timeout_ready_s":        o.TimeoutReady.Seconds(),
		"backends":               labels,
		"server_cpus":            cpuListMeta(o.ServerCPUs),
		"client_cpus":            cpuListMeta(o.ClientCPUs),
		"trace_path":             w.trace.Name,
		// Additions.
		"trace_format":          string(w.trace.Format),
		"num_trace_rows":        len(w.rows),
		"model_max_len":         o.ModelMaxLen,
		"effective_context":     w.context.Effective(),
		"prefix_mode":           o.PrefixMode,
		"repeat":                o.Repeat,
		"send_lag_threshold_ms": o.SendLagThresholdMs,
		"slo":                   o.SLO,
		"request_timeout_s":     o.RequestTimeout.Seconds(),
		"base_url":              o.BaseURL,
		"server_args":           o.ServerArgs,
		"variants":              o.Variants,
		"host":                  o.Host,
		"port_base":             o.PortBase,
	}
}
