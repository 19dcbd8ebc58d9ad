package profile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/roseinfer/roseinfer/harness/backend"
	"github.com/roseinfer/roseinfer/harness/run"
	"github.com/roseinfer/roseinfer/results"
	"github.com/roseinfer/roseinfer/traces"
)

// OnlineInput is what bench online's profile stage needs besides its flags.
type OnlineInput struct {
	Bench run.OnlineOptions // the benchmark's settings: backends, trace, sampling, warmup, servers
	// RunDir is the benchmark's run directory; "" makes a new
	// online_<YYYYmmdd_HHMMSS> under Bench.OutputDir (--profile-only).
	RunDir string
	// ResultsPath is the benchmark's online_results.json, if it ran: the
	// CPU split it chose (meta server_cpus/client_cpus) is reused when
	// Bench names none, so profiled servers run where measured ones did.
	ResultsPath string
	// Specs are the run specs to profile; nil builds them from Bench and
	// ThirdParty as the benchmark does.
	Specs []backend.Spec
	Log   io.Writer
}

// Online runs the profile stage of bench online. The error is for problems
// before any capture (bad flags, unreadable trace); failed captures are in
// the report and the manifest.
func Online(ctx context.Context, p Options, in OnlineInput) (*Report, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	tools, err := p.Tools()
	if err != nil || len(tools) == 0 {
		return nil, err
	}
	o := &in.Bench
	if in.ResultsPath != "" && o.ServerCPUs == "" && o.ClientCPUs == "" {
		o.ServerCPUs, o.ClientCPUs = cpusOfRun(in.ResultsPath)
	}
	work, err := newOnlineWorkload(o, &p)
	if err != nil {
		return nil, err
	}
	specs, skipped := in.Specs, []string(nil)
	if specs == nil {
		if specs, skipped, err = onlineSpecs(ctx, o); err != nil {
			return nil, err
		}
	}
	runDir, err := runDirFor(in.RunDir, o.RunDir, o.OutputDir, "online")
	if err != nil {
		return nil, err
	}
	labels := make([]string, len(specs))
	for i, s := range specs {
		labels[i] = s.Label
	}
	meta := onlineMeta(&p, o, tools, labels)
	meta["versions"] = run.Versions(ctx)
	if len(skipped) > 0 {
		meta["skipped"] = skipped
		for _, s := range skipped {
			fmt.Fprintf(logOrDiscard(in.Log), "[profile] skipped %s\n", s)
		}
	}
	st := newStage(&p, runDir, in.Log, meta)
	st.work, st.model, st.requestTimeout = work, o.Model, o.RequestTimeout
	st.launch = backend.LaunchOptions{Host: o.Host, PortBase: o.PortBase, UsedPorts: map[int]bool{}, RunDir: runDir,
		ReadyTimeout: o.TimeoutReady, Prefix: serverPrefix(o.ServerCPUs)}
	return st.rep, st.run(ctx, tools, specs)
}

func logOrDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// serverPrefix pins launched servers with taskset, as the benchmark does
// when --server-cpus is given.
func serverPrefix(cpus string) []string {
	if cpus == "" || cpus == run.NoPinning {
		return nil
	}
	return []string{"taskset", "-c", cpus}
}

// runDirFor returns the directory the stage writes into: the benchmark's,
// or a new <kind>_<YYYYmmdd_HHMMSS> one.
func runDirFor(benchRunDir, exact, parent, kind string) (string, error) {
	dir := benchRunDir
	if dir == "" {
		dir = exact
	}
	if dir == "" {
		base := filepath.Join(parent, kind+"_"+time.Now().Format("20060102_150405"))
		dir = base
		for i := 2; ; i++ {
			if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
				break
			}
			if i > 100 {
				return "", fmt.Errorf("run dir %s: too many runs in one second", base)
			}
			dir = fmt.Sprintf("%s_%d", base, i)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("run dir: %w", err)
	}
	return dir, nil
}

// onlineSpecs builds the run specs the benchmark runs for --backends and
// --variant: roseinfer and its variants, and the third-party backends. A
// backend that cannot run here is returned as a skip note.
func onlineSpecs(ctx context.Context, o *run.OnlineOptions) ([]backend.Spec, []string, error) {
	if o.BaseURL != "" {
		return nil, []string{o.BaseURL + ": a server given by --base-url cannot be restarted fresh for profiling"}, nil
	}
	var specs []backend.Spec
	var skipped []string
	seen := map[string]bool{}
	for _, name := range o.Backends {
		name = strings.TrimSpace(name)
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		switch {
		case name == baseRoseinfer:
			rs, err := roseinferSpecs(ctx, o)
			if err != nil {
				return nil, nil, err
			}
			specs = append(specs, rs...)
		case backend.IsThirdParty(name):
			tctx := traces.Context{ModelMaxLen: o.ModelMaxLen, OverheadTokens: o.PromptOverheadTokens,
				MaxInputLen: o.MaxInputLen, MaxOutputLen: o.MaxOutputLen}
			s, err := backend.ThirdParty(ctx, name, &o.ThirdParty, backend.ThirdPartyRun{Model: o.Model,
				ContextLen: tctx.ServerMaxLen(), GPU: o.GPU, ServerCPUs: o.ServerCPUs, Root: o.EnvsRoot})
			var un *backend.Unavailable
			if errors.As(err, &un) {
				skipped = append(skipped, un.Error())
				continue
			}
			if err != nil {
				return nil, nil, err
			}
			specs = append(specs, s)
		default:
			skipped = append(skipped, name+": not a backend this build can profile")
		}
	}
	return specs, skipped, nil
}

// roseinferSpecs are roseinfer's run specs: the plain run and one per
// --variant, as the benchmark builds them.
func roseinferSpecs(ctx context.Context, o *run.OnlineOptions) ([]backend.Spec, error) {
	bin := o.RoseinferBin
	if bin == "" {
		var err error
		if bin, err = backend.FindRoseinfer(ctx); err != nil {
			return nil, err
		}
	}
	env := map[string]string{}
	if o.GPU != "" {
		env["CUDA_VISIBLE_DEVICES"] = o.GPU
	}
	common := backend.RoseinferOptions{Binary: bin, Device: o.Device, Model: o.Model, Flags: o.ServerArgs, Env: env}
	specs := []backend.Spec{backend.Roseinfer(common)}
	for _, v := range o.Variants {
		label, flags, err := backend.ParseVariant(v)
		if err != nil {
			return nil, err
		}
		vo := common
		vo.Label = label
		vo.Flags = append(append([]string{}, o.ServerArgs...), flags...)
		specs = append(specs, backend.Roseinfer(vo))
	}
	return specs, nil
}

// onlineMeta is the manifest's meta: the original's keys (E.4), in its
// order, then ours.
func onlineMeta(p *Options, o *run.OnlineOptions, tools, labels []string) map[string]any {
	outLen := p.OutputLen
	if outLen == 0 {
		outLen = o.MaxOutputLen
	}
	m := map[string]any{
		"profile":                             p.Profile,
		"profile_only":                        p.Only,
		"profile_n":                           p.N,
		"profile_scale":                       p.Scale,
		"profile_output_len":                  outLen,
		"profile_start_offset_s":              o.StartOffsetS,
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
		"server_cpus":                         nilIfEmpty(o.ServerCPUs),
		"client_cpus":                         nilIfEmpty(o.ClientCPUs),
		"warmup_requests":                     o.WarmupRequests,
		"trtllm_worker_single_process":        o.ThirdParty.TRTLLMWorkerSingleProcess,
		"trtllm_profile_start_stop":           p.TRTLLMProfileStartStop,
		"trtllm_profile_record_gc":            p.TRTLLMProfileRecordGC,
		"vllm_async_scheduling":               o.ThirdParty.VLLMAsyncScheduling,
		// Ours.
		"profile_nsys_bin": p.NsysBin,
		"trace_path":       o.TracePath,
		"device":           o.Device,
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
