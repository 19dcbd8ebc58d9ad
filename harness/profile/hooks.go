package profile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	engineprofile "github.com/roseinfer/roseinfer/engine/profile"
)

// capture is one (tool, backend) profile run as the hooks see it.
type capture struct {
	tool, label, base string
	outDir            string // absolute: the server may resolve paths from elsewhere
	opts              *Options
}

// hook is a backend's part of the profile stage: what it adds to the
// server's command and environment, and what it does around the replay.
// A nil function does nothing.
type hook struct {
	tools      []string // tools it supports
	serverArgs func(c *capture) []string
	env        func(c *capture) map[string]string
	// begin runs after the warmup, before the replay; end after it. end
	// returns the server's stop_profile answer when there is one.
	begin func(ctx context.Context, c *capture, ctl *controller) error
	end   func(ctx context.Context, c *capture, ctl *controller) ([]byte, error)
	// stopMarker finds a server that left the process tree (TensorRT-LLM),
	// for the stop under nsys.
	stopMarker string
	// nsysExit is how long nsys gets to write its report after the server
	// stopped (default Options waits.NsysExit).
	nsysExit func(w waits) time.Duration
}

func (h *hook) supports(tool string) bool {
	for _, t := range h.tools {
		if t == tool {
			return true
		}
	}
	return false
}

// Base backend names the hooks know.
const (
	baseRoseinfer = "roseinfer"
	baseVLLM      = "vllm"
	baseSGLang    = "sglang"
	baseTRTLLM    = "trtllm"
)

// hooks are the per-backend behaviours. Backends without an entry (llama,
// custom) get genericHook: nsys only.
var hooks = map[string]*hook{
	baseRoseinfer: {
		tools:      []string{ToolTorch, ToolNsys, ToolPprof},
		serverArgs: roseinferArgs,
		env:        roseinferEnv,
		begin:      roseinferBegin,
		end:        roseinferEnd,
	},
	baseVLLM: {
		tools:      []string{ToolTorch, ToolNsys},
		serverArgs: vllmArgs,
		env:        vllmEnv,
		begin:      vllmBegin,
		end:        vllmEnd,
	},
	baseSGLang: {
		tools:      []string{ToolTorch, ToolNsys},
		serverArgs: sglangArgs,
		begin:      sglangBegin,
		end:        sglangEnd,
	},
	baseTRTLLM: {
		tools:      []string{ToolTorch, ToolNsys},
		env:        trtllmEnv,
		end:        trtllmEnd,
		stopMarker: "tensorrt_llm.commands.serve",
		nsysExit:   func(w waits) time.Duration { return w.NsysExitTRT },
	},
}

var genericHook = &hook{tools: []string{ToolNsys}}

func hookFor(base string) *hook {
	if h, ok := hooks[base]; ok {
		return h
	}
	return genericHook
}

// commonEnv is what every profiled server gets: roseinfer's NVTX
// ranges on, which the other servers ignore.
func commonEnv() map[string]string { return map[string]string{"ROSEINFER_NVTX": "1"} }

func flag01(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// roseinferArgs confines the server's captures to the capture's directory:
// roseinfer serve writes profiles only under --profile-dir, and the stage
// asks for them in c.outDir.
func roseinferArgs(c *capture) []string { return []string{"--profile-dir", c.outDir} }

// roseinferEnv: the original's torch variables, which our server reads for
// its phase trace's step window (the other three are accepted for
// compatibility and recorded in the manifest).
func roseinferEnv(c *capture) map[string]string {
	if c.tool != ToolTorch {
		return nil
	}
	o := c.opts
	env := map[string]string{
		"ROSEINFER_TORCH_PROFILE_WITH_STACK":          flag01(o.TorchWithStack),
		"ROSEINFER_TORCH_PROFILE_RECORD_SHAPES":       flag01(o.TorchRecordShape),
		"ROSEINFER_TORCH_PROFILE_WITH_PROFILE_MEMORY": flag01(o.TorchWithMemory),
	}
	if o.TorchMinimal {
		env[engineprofile.EnvDelaySteps] = strconv.Itoa(o.TorchDelaySteps)
		env[engineprofile.EnvNumSteps] = strconv.Itoa(o.TorchNumSteps)
	}
	return env
}

// roseinferStart is the body of roseinfer's POST /start_profile.
type roseinferStart struct {
	Tool      string `json:"tool"`
	OutputDir string `json:"output_dir"`
}

func roseinferBegin(ctx context.Context, c *capture, ctl *controller) error {
	if c.tool == ToolNsys {
		return nil // nsys captures the whole process; nothing to switch on
	}
	_, err := ctl.post(ctx, "start_profile", roseinferStart{Tool: c.tool, OutputDir: c.outDir})
	return err
}

func roseinferEnd(ctx context.Context, c *capture, ctl *controller) ([]byte, error) {
	if c.tool == ToolNsys {
		return nil, nil
	}
	return ctl.post(ctx, "stop_profile", nil)
}

func vllmArgs(c *capture) []string {
	if c.tool == ToolNsys && c.opts.VLLMNVTXScopes {
		return []string{"--enable-layerwise-nvtx-tracing"}
	}
	return nil
}

func vllmEnv(c *capture) map[string]string {
	if c.tool != ToolTorch {
		return nil
	}
	o := c.opts
	env := map[string]string{
		"VLLM_TORCH_PROFILER_DIR":                 c.outDir,
		"VLLM_TORCH_PROFILER_WITH_STACK":          flag01(o.TorchWithStack),
		"VLLM_TORCH_PROFILER_RECORD_SHAPES":       flag01(o.TorchRecordShape),
		"VLLM_TORCH_PROFILER_WITH_PROFILE_MEMORY": flag01(o.TorchWithMemory),
	}
	if o.TorchMinimal {
		env["VLLM_TORCH_PROFILER_DISABLE_ASYNC_LLM"] = "1"
		env["VLLM_PROFILER_DELAY_ITERS"] = strconv.Itoa(o.TorchDelaySteps)
		env["VLLM_PROFILER_MAX_ITERS"] = strconv.Itoa(o.TorchNumSteps)
	}
	return env
}

func vllmBegin(ctx context.Context, c *capture, ctl *controller) error {
	if c.tool != ToolTorch {
		return nil
	}
	_, err := ctl.post(ctx, "start_profile", nil)
	return err
}

// vllmEnd stops the profiler, then waits: vLLM writes its traces after
// answering.
func vllmEnd(ctx context.Context, c *capture, ctl *controller) ([]byte, error) {
	if c.tool != ToolTorch {
		return nil, nil
	}
	ans, err := ctl.post(ctx, "stop_profile", nil)
	sleep(ctx, c.opts.waits.AfterStop)
	return ans, err
}

func sglangArgs(c *capture) []string {
	if c.tool == ToolNsys && c.opts.SGLangLayerwiseNVTX {
		return []string{"--enable-layerwise-nvtx-marker"}
	}
	return nil
}

// sglangStart is SGLang's /start_profile body, in the original's key order.
type sglangStart struct {
	OutputDir     string   `json:"output_dir"`
	Activities    []string `json:"activities"`
	WithStack     bool     `json:"with_stack"`
	RecordShapes  bool     `json:"record_shapes"`
	StartStep     *int     `json:"start_step,omitempty"`
	NumSteps      *int     `json:"num_steps,omitempty"`
	ProfilePrefix string   `json:"profile_prefix,omitempty"`
}

func sglangStartBody(c *capture) sglangStart {
	o := c.opts
	b := sglangStart{OutputDir: c.outDir, Activities: []string{"CPU", "GPU"}, WithStack: o.TorchWithStack,
		RecordShapes: o.TorchRecordShape}
	if o.TorchWithMemory {
		b.Activities = append(b.Activities, "MEM")
	}
	if o.TorchMinimal {
		if o.TorchDelaySteps > 0 {
			b.StartStep = &o.TorchDelaySteps
		}
		if o.TorchNumSteps > 0 {
			b.NumSteps = &o.TorchNumSteps
		}
		b.ProfilePrefix = c.label
	}
	return b
}

func sglangBegin(ctx context.Context, c *capture, ctl *controller) error {
	if c.tool != ToolTorch {
		return nil
	}
	_, err := ctl.post(ctx, "start_profile", sglangStartBody(c))
	return err
}

// sglangEnd: with a step budget SGLang stops by itself; otherwise stop it.
// Either way give it time to write the trace. Under nsys, a short pause lets
// the last kernels land before the server is stopped.
func sglangEnd(ctx context.Context, c *capture, ctl *controller) ([]byte, error) {
	o := c.opts
	if c.tool == ToolNsys {
		sleep(ctx, o.waits.AfterNsysRun)
		return nil, nil
	}
	if o.TorchMinimal && o.TorchNumSteps > 0 {
		sleep(ctx, o.waits.AfterStop)
		return nil, nil
	}
	ans, err := ctl.post(ctx, "stop_profile", nil)
	sleep(ctx, o.waits.AfterStop)
	return ans, err
}

// trtllmTraceFile is where TensorRT-LLM writes its torch trace.
func trtllmTraceFile(c *capture) string { return filepath.Join(c.outDir, "trace.json") }

func trtllmEnv(c *capture) map[string]string {
	o := c.opts
	env := map[string]string{
		"TLLM_LLMAPI_ENABLE_NVTX": "1",
		"TLLM_PROFILE_START_STOP": o.TRTLLMProfileStartStop,
	}
	if o.TRTLLMProfileRecordGC {
		env["TLLM_PROFILE_RECORD_GC"] = "1"
	}
	if c.tool == ToolTorch {
		env["TLLM_TORCH_PROFILE_TRACE"] = trtllmTraceFile(c)
	}
	return env
}

// trtllmEnd waits for the torch trace, which TensorRT-LLM writes when its
// profiled iteration window closes; the TensorRT (engine) backend never
// writes one.
func trtllmEnd(ctx context.Context, c *capture, _ *controller) ([]byte, error) {
	if c.tool != ToolTorch {
		return nil, nil
	}
	if !waitForFile(ctx, trtllmTraceFile(c), c.opts.waits.TraceFileWait) {
		return nil, fmt.Errorf("torch trace not produced (TensorRT backend); use nsys for GPU profiling")
	}
	return nil, nil
}

// waitForFile polls for a non-empty file until the timeout.
func waitForFile(ctx context.Context, path string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		sleep(ctx, 100*time.Millisecond)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
