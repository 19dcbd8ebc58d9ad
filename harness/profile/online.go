package profile

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/roseinfer/roseinfer/harness/backend"
	"github.com/roseinfer/roseinfer/harness/rundir"
	"github.com/roseinfer/roseinfer/harness/servers"
	"github.com/roseinfer/roseinfer/harness/workload"
	"github.com/roseinfer/roseinfer/results"
	"github.com/roseinfer/roseinfer/traces"
)

// OnlineInput is what bench online's profile stage needs besides its flags.
type OnlineInput struct {
	// The benchmark's settings: its servers, its workload (trace,
	// sampling, warmup), and from its load the schedule offset and the
	// per-request timeout.
	Servers        servers.Options
	Workload       workload.Options
	StartOffsetS   float64
	RequestTimeout time.Duration
	// RunDir is the benchmark's run directory; "" makes a new
	// online_<YYYYmmdd_HHMMSS> under OutputDir (--profile-only).
	RunDir    string
	OutputDir string
	// ResultsPath is the benchmark's online_results.json, if it ran: the
	// CPU split it chose (meta server_cpus/client_cpus) is reused when
	// Servers names none, so profiled servers run where measured ones did.
	// Without it (--profile-only) the stage chooses the split as the
	// benchmark would (servers.ApplyCPUSplit).
	ResultsPath string
	// Specs are the run specs to profile; nil builds them from Servers as
	// the benchmark does.
	Specs []backend.Spec
	Log   io.Writer
}

// Online runs the profile stage of bench online. The error is for problems
// before any capture (bad flags, unreadable trace); failed captures are in
// the report and the manifest.
func Online(ctx context.Context, p Options, in OnlineInput) (*Report, error) {
	tools, err := p.validTools()
	if err != nil || len(tools) == 0 {
		return nil, err
	}
	o := &in.Servers
	log := logOrDiscard(in.Log)
	if in.ResultsPath != "" && o.ServerCPUs == "" && o.ClientCPUs == "" {
		o.ServerCPUs, o.ClientCPUs = cpusOfRun(in.ResultsPath)
	}
	if in.Workload.ModelDir == "" && workload.IsModelDir(o.Model) {
		in.Workload.ModelDir = o.Model
	}
	work, err := newOnlineWorkload(&in.Workload, in.StartOffsetS, &p)
	if err != nil {
		return nil, err
	}
	// The benchmark's CPU split: the one it recorded, or with
	// --profile-only the one it would choose (the default split unless
	// lists or "none" are given).
	prefix, note, err := servers.ApplyCPUSplit(o)
	if note != "" {
		fmt.Fprintln(log, "[profile] "+note)
	}
	if err != nil {
		return nil, err
	}
	specs, skipped := in.Specs, []string(nil)
	if specs == nil {
		if specs, skipped, err = onlineSpecs(ctx, o, work.w.Context()); err != nil {
			return nil, err
		}
	}
	runDir, err := rundir.Make(in.RunDir, in.OutputDir, "online")
	if err != nil {
		return nil, err
	}
	meta := onlineMeta(&p, &in, tools, labelsOf(specs))
	meta["versions"] = rundir.Versions(ctx)
	if len(skipped) > 0 {
		meta["skipped"] = skipped
		for _, s := range skipped {
			fmt.Fprintf(log, "[profile] skipped %s\n", s)
		}
	}
	st := newStage(&p, runDir, in.Log, meta)
	st.work, st.model, st.requestTimeout = work, o.Model, in.RequestTimeout
	st.launch = backend.LaunchOptions{Host: o.Host, PortBase: o.PortBase, UsedPorts: map[int]bool{}, RunDir: runDir,
		ReadyTimeout: o.TimeoutReady, Prefix: prefix}
	return st.rep, st.run(ctx, tools, specs)
}

func logOrDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// onlineSpecs are the benchmark's run specs (servers.Specs). The backends
// it skips, and a --base-url server (it cannot be restarted fresh), come
// back as skip notes.
func onlineSpecs(ctx context.Context, o *servers.Options, c traces.Context) ([]backend.Spec, []string, error) {
	if o.BaseURL != "" {
		return nil, []string{o.BaseURL + ": a server given by --base-url cannot be restarted fresh for profiling"}, nil
	}
	specs, skippedBackends, err := servers.Specs(ctx, o, c)
	if err != nil {
		return nil, nil, err
	}
	var skipped []string
	for _, b := range skippedBackends {
		note := b.Backend + " skipped: " + b.Error
		if b.FixHint != "" {
			note += " (fix: " + b.FixHint + ")"
		}
		skipped = append(skipped, note)
	}
	return specs, skipped, nil
}

// onlineMeta is the manifest's meta: the original's keys, in its
// order, then ours.
func onlineMeta(p *Options, in *OnlineInput, tools, labels []string) map[string]any {
	outLen := p.OutputLen
	if outLen == 0 {
		outLen = in.Workload.MaxOutputLen
	}
	m := map[string]any{
		"profile":                             p.Profile,
		"profile_only":                        p.Only,
		"profile_n":                           p.N,
		"profile_scale":                       p.Scale,
		"profile_output_len":                  outLen,
		"profile_start_offset_s":              in.StartOffsetS,
		"profile_nsys_trace":                  p.NsysTrace,
		"profile_nsys_cuda_graph_trace":       p.NsysCUDAGraphTrace,
		"profile_nsys_cpuctxsw":               nilIfEmpty(p.NsysCPUCtxSw),
		"profile_nsys_kill":                   nilIfEmpty(p.NsysKill),
		"profile_nsys_cuda_flush_interval_ms": nilIfZero(p.NsysCUDAFlushIntervalMs),
		"profile_torch_minimal":               p.TorchMinimal,
		"profile_torch_delay_steps":           p.TorchDelaySteps,
		"profile_torch_num_steps":             p.TorchNumSteps,
		"profile_torch_with_stack":            p.TorchWithStack,
		"profile_torch_record_shapes":         p.TorchRecordShape,
		"profile_torch_with_memory":           p.TorchWithMemory,
		"profile_vllm_nvtx_scopes":            p.VLLMNVTXScopes,
		"profile_sglang_layerwise_nvtx":       p.SGLangLayerwiseNVTX,
		"tools":                               tools,
		"backends":                            labels,
		"server_cpus":                         nilIfEmpty(in.Servers.ServerCPUs),
		"client_cpus":                         nilIfEmpty(in.Servers.ClientCPUs),
		"warmup_requests":                     in.Workload.WarmupRequests,
		"trtllm_worker_single_process":        in.Servers.ThirdParty.TRTLLMWorkerSingleProcess,
		"trtllm_profile_start_stop":           p.TRTLLMProfileStartStop,
		"trtllm_profile_record_gc":            p.TRTLLMProfileRecordGC,
		"vllm_async_scheduling":               in.Servers.ThirdParty.VLLMAsyncScheduling,
		// Ours.
		"profile_nsys_bin": p.NsysBin,
		"trace_path":       in.Workload.TracePath,
		"device":           in.Servers.Device,
	}
	return m
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nilIfZero(n int) any {
	if n == 0 {
		return nil
	}
	return n
}

// cpusOfRun reads the CPU lists a benchmark run used from its results'
// meta (a list of CPU ids, as the original wrote them, or a taskset
// string); "" when absent.
func cpusOfRun(resultsPath string) (server, client string) {
	on, err := results.LoadOnline(resultsPath)
	if err != nil {
		return "", ""
	}
	return cpuList(on.Meta["server_cpus"]), cpuList(on.Meta["client_cpus"])
}

func cpuList(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []any:
		parts := make([]string, 0, len(v))
		for _, c := range v {
			n, ok := c.(float64)
			if !ok || n < 0 || n != float64(int(n)) {
				return ""
			}
			parts = append(parts, strconv.Itoa(int(n)))
		}
		return strings.Join(parts, ",")
	}
	return ""
}
