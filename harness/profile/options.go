// Package profile is the harness's profile stage: after
// the benchmark stage, or alone with --profile-only, every (tool, backend)
// pair gets a fresh server that runs a short workload under a profiler, and
// profile_manifest.json records where each artifact is. The benchmark's
// results files are never touched, and a failed capture is recorded as the
// run's profile_error without stopping the stage.
//
// Tools: torch (each backend's own tracer; for roseinfer its phase trace
// trace.json), nsys (the server runs under `nsys profile`), pprof (roseinfer
// only: Go CPU, goroutine, block and mutex profiles plus trace.json).
// Per-backend behaviour (environment, extra server flags, HTTP calls) is in
// hooks.go, as the original harness's online and offline profile stages.
package profile

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"
)

// Tools.
const (
	ToolTorch = "torch"
	ToolNsys  = "nsys"
	ToolPprof = "pprof"
)

// Options are the original's profile flags of bench online plus ours
// (pprof, --profile-nsys-bin). DefaultOptions gives the original's defaults.
type Options struct {
	Profile   string  // none, torch, nsys, pprof, both (torch then nsys), all (torch, nsys, pprof)
	Only      bool    // --profile-only: skip the benchmark stage
	N         int     // --profile-n: first N requests (by time) of the trace
	Scale     float64 // --profile-scale
	OutputLen int     // --profile-output-len; 0 = the benchmark's --max-output-len

	TorchMinimal     bool // --profile-torch-minimal (default) / --profile-torch-full
	TorchDelaySteps  int
	TorchNumSteps    int
	TorchWithStack   bool
	TorchRecordShape bool
	TorchWithMemory  bool

	VLLMNVTXScopes      bool // vLLM --enable-layerwise-nvtx-tracing under nsys
	SGLangLayerwiseNVTX bool // SGLang --enable-layerwise-nvtx-marker under nsys

	NsysBin                 string // --profile-nsys-bin (ours): the nsys executable
	NsysTrace               string
	NsysCUDAGraphTrace      string
	NsysCPUCtxSw            string // "" = flag not given
	NsysKill                string // "" = flag not given
	NsysCUDAFlushIntervalMs int    // 0 = flag not given

	TRTLLMProfileStartStop string // TLLM_PROFILE_START_STOP
	TRTLLMProfileRecordGC  bool   // TLLM_PROFILE_RECORD_GC=1

	// Offline: the fixed-length workload of bench offline's stage.
	NumPrompts    int // --profile-num-prompts
	InputLen      int // --profile-input-len
	OfflineOutLen int // --profile-output-len of bench offline

	waits waits
}

// waits are the stage's fixed delays and timeouts (the original's); tests
// shorten them.
type waits struct {
	HTTPTimeout   time.Duration // each /start_profile or /stop_profile POST
	AfterStop     time.Duration // after stop_profile (vLLM, SGLang flush their traces)
	AfterNsysRun  time.Duration // SGLang under nsys, after the replay
	NsysExit      time.Duration // the nsys process after the server stopped
	NsysExitTRT   time.Duration
	ServerStop    time.Duration // server tree SIGTERM to SIGKILL under nsys
	ReportWait    time.Duration // the .nsys-rep file after nsys exited
	TraceFileWait time.Duration // TensorRT-LLM's torch trace file
}

var defaultWaits = waits{
	HTTPTimeout:   300 * time.Second,
	AfterStop:     5 * time.Second,
	AfterNsysRun:  time.Second,
	NsysExit:      60 * time.Second,
	NsysExitTRT:   300 * time.Second,
	ServerStop:    20 * time.Second,
	ReportWait:    15 * time.Second,
	TraceFileWait: 15 * time.Second,
}

// DefaultOptions returns the original's defaults (profiling off).
func DefaultOptions() Options {
	return Options{
		Profile:                "none",
		N:                      32,
		Scale:                  0.4,
		TorchMinimal:           true,
		TorchNumSteps:          20,
		VLLMNVTXScopes:         true,
		SGLangLayerwiseNVTX:    true,
		NsysBin:                "nsys",
		NsysTrace:              "cuda,nvtx,osrt",
		NsysCUDAGraphTrace:     "node",
		TRTLLMProfileStartStop: "1-20",
		TRTLLMProfileRecordGC:  true,
		NumPrompts:             8,
		InputLen:               256,
		OfflineOutLen:          32,
		waits:                  defaultWaits,
	}
}

// Enabled reports whether a profile stage runs.
func (o *Options) Enabled() bool { return o.Profile != "" && o.Profile != "none" }

// Tools lists the tools in run order: both = torch then nsys (as the
// original), all = torch, nsys, pprof.
func (o *Options) Tools() ([]string, error) {
	switch o.Profile {
	case "", "none":
		return nil, nil
	case ToolTorch, ToolNsys, ToolPprof:
		return []string{o.Profile}, nil
	case "both":
		return []string{ToolTorch, ToolNsys}, nil
	case "all":
		return []string{ToolTorch, ToolNsys, ToolPprof}, nil
	}
	return nil, fmt.Errorf("--profile %q: want none, torch, nsys, pprof, both or all", o.Profile)
}

// validTools checks the flags and lists the tools in run order (none when
// the stage is off).
func (o *Options) validTools() ([]string, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return o.Tools()
}

// Validate checks the flags; --profile-only without a tool is an error, as
// in the original.
func (o *Options) Validate() error {
	if _, err := o.Tools(); err != nil {
		return err
	}
	switch {
	case o.Only && !o.Enabled():
		return errors.New("--profile-only needs --profile (torch, nsys, pprof, both or all)")
	case o.N < 1:
		return fmt.Errorf("--profile-n %d: need at least one request", o.N)
	case !(o.Scale > 0):
		return fmt.Errorf("--profile-scale %v: must be positive", o.Scale)
	case o.OutputLen < 0 || o.TorchDelaySteps < 0 || o.TorchNumSteps < 0 || o.NsysCUDAFlushIntervalMs < 0:
		return errors.New("--profile-output-len, --profile-torch-delay-steps, --profile-torch-num-steps and --profile-nsys-cuda-flush-interval-ms must not be negative")
	case o.NumPrompts < 1 || o.InputLen < 1 || o.OfflineOutLen < 1:
		return errors.New("--profile-num-prompts, --profile-input-len and --profile-output-len must be at least 1")
	case o.NsysBin == "":
		return errors.New("--profile-nsys-bin is empty")
	}
	return nil
}

const profileUsage = "profile stage after the benchmark: none, torch, nsys, pprof (roseinfer's Go profiles), both (torch then nsys) or all"

// RegisterFlags adds bench online's profile flags (the original's names and
// defaults) to fs. Flags fs already has (another part of the command
// registered them) are left alone.
func RegisterFlags(fs *pflag.FlagSet, o *Options) {
	r := registrar{fs}
	r.str(&o.Profile, "profile", profileUsage)
	r.boolean(&o.Only, "profile-only", "skip the benchmark stage; only profile (needs --profile)")
	r.integer(&o.N, "profile-n", "requests replayed while profiling (the first N of the trace by time)")
	r.float(&o.Scale, "profile-scale", "trace time scale of the profiling replay")
	r.integer(&o.OutputLen, "profile-output-len", "output clamp while profiling (0 = --max-output-len)")
	r.pair(&o.TorchMinimal, "profile-torch-minimal", "profile-torch-full",
		"torch: record a bounded step window (delay/num steps)", "torch: record every step")
	r.integer(&o.TorchDelaySteps, "profile-torch-delay-steps", "torch: engine steps to skip before recording")
	r.integer(&o.TorchNumSteps, "profile-torch-num-steps", "torch: engine steps to record")
	r.negatable(&o.TorchWithStack, "profile-torch-with-stack", "profile-torch-no-with-stack", "torch: collect stacks")
	r.negatable(&o.TorchRecordShape, "profile-torch-record-shapes", "profile-torch-no-record-shapes", "torch: record shapes")
	r.negatable(&o.TorchWithMemory, "profile-torch-with-memory", "profile-torch-no-with-memory", "torch: profile memory")
	r.negatable(&o.VLLMNVTXScopes, "profile-vllm-nvtx-scopes", "profile-no-vllm-nvtx-scopes",
		"nsys: vLLM --enable-layerwise-nvtx-tracing")
	r.negatable(&o.SGLangLayerwiseNVTX, "profile-sglang-layerwise-nvtx", "profile-no-sglang-layerwise-nvtx",
		"nsys: SGLang --enable-layerwise-nvtx-marker")
	r.nsys(o, true)
	r.str(&o.TRTLLMProfileStartStop, "trtllm-profile-start-stop", "TensorRT-LLM TLLM_PROFILE_START_STOP while profiling (start-stop[,..] or iter[,..])")
	r.negatable(&o.TRTLLMProfileRecordGC, "trtllm-profile-record-gc", "trtllm-no-profile-record-gc",
		"TensorRT-LLM TLLM_PROFILE_RECORD_GC=1 while profiling")
}

// RegisterOfflineFlags adds bench offline's profile flags: the tool,
// --profile-only, the fixed-length workload and the nsys options.
func RegisterOfflineFlags(fs *pflag.FlagSet, o *Options) {
	r := registrar{fs}
	r.str(&o.Profile, "profile", profileUsage)
	r.boolean(&o.Only, "profile-only", "skip the throughput stage; only profile (needs --profile)")
	r.integer(&o.NumPrompts, "profile-num-prompts", "prompts of the profiling batch")
	r.integer(&o.InputLen, "profile-input-len", "prompt tokens of the profiling batch")
	r.integer(&o.OfflineOutLen, "profile-output-len", "tokens generated per prompt while profiling")
	r.nsys(o, false)
}

// registrar adds flags unless fs already has them.
type registrar struct{ fs *pflag.FlagSet }

func (r registrar) has(name string) bool { return r.fs.Lookup(name) != nil }

func (r registrar) str(p *string, name, usage string) {
	if !r.has(name) {
		r.fs.StringVar(p, name, *p, usage)
	}
}

func (r registrar) boolean(p *bool, name, usage string) {
	if !r.has(name) {
		r.fs.BoolVar(p, name, *p, usage)
	}
}

func (r registrar) integer(p *int, name, usage string) {
	if !r.has(name) {
		r.fs.IntVar(p, name, *p, usage)
	}
}

func (r registrar) float(p *float64, name, usage string) {
	if !r.has(name) {
		r.fs.Float64Var(p, name, *p, usage)
	}
}

// negatable registers --on and --off on one bool, as the original's
// argparse BooleanOptionalAction pairs.
func (r registrar) negatable(p *bool, on, off, usage string) {
	r.pair(p, on, off, usage, "turn --"+on+" off")
}

func (r registrar) pair(p *bool, on, off, onUsage, offUsage string) {
	r.boolean(p, on, onUsage)
	if !r.has(off) {
		f := r.fs.VarPF(negated{p}, off, "", offUsage)
		f.NoOptDefVal = "true"
	}
}

func (r registrar) nsys(o *Options, online bool) {
	r.str(&o.NsysBin, "profile-nsys-bin", "nsys executable used by --profile nsys")
	if online {
		r.str(&o.NsysTrace, "profile-nsys-trace", "nsys profile --trace=")
		r.str(&o.NsysCUDAGraphTrace, "profile-nsys-cuda-graph-trace", "nsys profile --cuda-graph-trace=")
		r.str(&o.NsysCPUCtxSw, "profile-nsys-cpuctxsw", "nsys profile --cpuctxsw= (empty: not given)")
		r.str(&o.NsysKill, "profile-nsys-kill", "nsys profile --kill= (empty: not given)")
	}
	r.integer(&o.NsysCUDAFlushIntervalMs, "profile-nsys-cuda-flush-interval-ms", "nsys profile --cuda-flush-interval= (0: not given)")
}

// negated is the --no-x half of a pair: giving it sets the shared bool to false.
type negated struct{ target *bool }

// String is "false": giving the flag is what turns the value off, so help
// text shows no default for it.
func (n negated) String() string { return "false" }
func (n negated) Type() string   { return "bool" }
func (n negated) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*n.target = !v
	return nil
}
