package backend

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/roseinfer/roseinfer/envs"
	"github.com/roseinfer/roseinfer/harness/cpuset"
	"github.com/roseinfer/roseinfer/results"
)

// Names of the third-party backends, as given to --backends.
const (
	NameVLLM   = "vllm"
	NameSGLang = "sglang"
	NameTRTLLM = "trtllm"
	NameLlama  = "llama"
	NameCustom = "custom"
)

// ThirdPartyOptions are the command-line settings of the backends that are
// not roseinfer (the original's per-backend flags plus ours).
// DefaultThirdParty gives the defaults.
type ThirdPartyOptions struct {
	// Dtype is the original's --dtype: auto (no flag), fp16, bf16, fp32;
	// vLLM and SGLang get --dtype float16 etc., TensorRT-LLM online none.
	Dtype string
	// Tokenizer, when set, is passed as vLLM --tokenizer, SGLang
	// --tokenizer-path, TensorRT-LLM --tokenizer.
	Tokenizer string

	VLLMPython           string
	VLLMAttentionBackend string // auto (no flag), flashinfer, flash_attn, triton_attn
	VLLMMaxNumSeqs       int    // 0: 128 with flashinfer (vLLM 0.13 OOMs on 12 GB GPUs otherwise), else no flag
	VLLMAsyncScheduling  bool
	VLLMArgs             string // extra server flags, appended

	SGLangPython              string
	SGLangAttentionBackend    string // flashinfer, triton, torch_native, fa3, flashmla
	SGLangSamplingBackend     string // flashinfer, pytorch
	SGLangMaxRunningRequests  int    // 0: no flag
	SGLangArgs                string
	TRTLLMPython              string
	TRTLLMBackend             string // pytorch, tensorrt, trt, _autodeploy
	TRTLLMWorkerSingleProcess bool   // TLLM_WORKER_USE_SINGLE_PROCESS=1
	TRTLLMMaxBatchSize        int    // 0: no flag
	TRTLLMExtraLLMAPIOptions  string // YAML file for --extra_llm_api_options
	TRTLLMArgs                string

	LlamaServerBin string // default: llama-server on PATH
	LlamaModel     string // GGUF file
	LlamaParallel  int    // -np slots; the context is Parallel × context length
	LlamaArgs      string

	BackendCmd string // custom: "my-server --port {port}"
}

// DefaultThirdParty returns the original's defaults.
func DefaultThirdParty() ThirdPartyOptions {
	return ThirdPartyOptions{
		Dtype:                  "fp16",
		VLLMAttentionBackend:   "flashinfer",
		VLLMAsyncScheduling:    true,
		SGLangAttentionBackend: "triton",
		SGLangSamplingBackend:  "flashinfer",
		TRTLLMBackend:          "tensorrt",
		LlamaParallel:          16,
	}
}

// negatedBool is the --x-no-y half of a --x-y/--x-no-y pair: giving it sets
// the shared value to false.
type negatedBool struct{ target *bool }

func (n negatedBool) String() string { return strconv.FormatBool(!*n.target) }
func (n negatedBool) Type() string   { return "bool" }
func (n negatedBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*n.target = !v
	return nil
}

// RegisterThirdPartyFlags adds the third-party backends' flags to a command
// (bench online and bench offline). --dtype and --tokenizer are added only
// when the command has not defined them itself.
func RegisterThirdPartyFlags(fs *pflag.FlagSet, o *ThirdPartyOptions) {
	if fs.Lookup("dtype") == nil {
		fs.StringVar(&o.Dtype, "dtype", o.Dtype, "dtype of vLLM/SGLang/TensorRT-LLM: auto, fp16, bf16 or fp32")
	}
	if fs.Lookup("tokenizer") == nil {
		fs.StringVar(&o.Tokenizer, "tokenizer", o.Tokenizer, "tokenizer for vLLM/SGLang/TensorRT-LLM (default: the model's)")
	}
	fs.StringVar(&o.VLLMPython, "vllm-python", o.VLLMPython, "vLLM interpreter (default: $ROSELLM_VLLM_PYTHON, $VLLM_PYTHON, .venvs/vllm/bin/python)")
	fs.StringVar(&o.VLLMAttentionBackend, "vllm-attention-backend", o.VLLMAttentionBackend, "vLLM --attention-backend: auto (no flag), flashinfer, flash_attn, triton_attn")
	fs.IntVar(&o.VLLMMaxNumSeqs, "vllm-max-num-seqs", o.VLLMMaxNumSeqs, "vLLM --max-num-seqs (0: 128 with flashinfer, else vLLM's default)")
	fs.BoolVar(&o.VLLMAsyncScheduling, "vllm-async-scheduling", o.VLLMAsyncScheduling, "vLLM --async-scheduling")
	neg := fs.VarPF(negatedBool{&o.VLLMAsyncScheduling}, "vllm-no-async-scheduling", "", "vLLM --no-async-scheduling")
	neg.NoOptDefVal = "true"
	fs.StringVar(&o.VLLMArgs, "vllm-args", o.VLLMArgs, `extra vLLM server flags, e.g. "--no-enable-prefix-caching --seed 0"`)

	fs.StringVar(&o.SGLangPython, "sglang-python", o.SGLangPython, "SGLang interpreter (default: $ROSELLM_SGLANG_PYTHON, $SGLANG_PYTHON, .venvs/sglang/bin/python)")
	fs.StringVar(&o.SGLangAttentionBackend, "sglang-attention-backend", o.SGLangAttentionBackend, "SGLang --attention-backend: flashinfer, triton, torch_native, fa3, flashmla")
	fs.StringVar(&o.SGLangSamplingBackend, "sglang-sampling-backend", o.SGLangSamplingBackend, "SGLang --sampling-backend: flashinfer, pytorch")
	fs.IntVar(&o.SGLangMaxRunningRequests, "sglang-max-running-requests", o.SGLangMaxRunningRequests, "SGLang --max-running-requests (0: SGLang's default)")
	fs.StringVar(&o.SGLangArgs, "sglang-args", o.SGLangArgs, `extra SGLang server flags, e.g. "--disable-radix-cache"`)

	fs.StringVar(&o.TRTLLMPython, "trtllm-python", o.TRTLLMPython, "TensorRT-LLM interpreter (default: $ROSELLM_TRTLLM_PYTHON, $TRTLLM_PYTHON, .venvs/trtllm/bin/python)")
	fs.StringVar(&o.TRTLLMBackend, "trtllm-backend", o.TRTLLMBackend, "TensorRT-LLM --backend: tensorrt (GPT-2 has no PyTorch-backend model), pytorch, trt, _autodeploy")
	fs.BoolVar(&o.TRTLLMWorkerSingleProcess, "trtllm-worker-single-process", o.TRTLLMWorkerSingleProcess, "set TLLM_WORKER_USE_SINGLE_PROCESS=1")
	fs.IntVar(&o.TRTLLMMaxBatchSize, "trtllm-max-batch-size", o.TRTLLMMaxBatchSize, "TensorRT-LLM --max_batch_size (0: its default)")
	fs.StringVar(&o.TRTLLMExtraLLMAPIOptions, "trtllm-extra-llm-api-options", o.TRTLLMExtraLLMAPIOptions, "YAML file for --extra_llm_api_options (e.g. dtype: float16)")
	fs.StringVar(&o.TRTLLMArgs, "trtllm-args", o.TRTLLMArgs, "extra trtllm-serve flags")

	fs.StringVar(&o.LlamaServerBin, "llama-server-bin", o.LlamaServerBin, "llama.cpp llama-server executable (default: llama-server on PATH)")
	fs.StringVar(&o.LlamaModel, "llama-model", o.LlamaModel, "GGUF model for llama-server (e.g. gpt2-f16.gguf)")
	fs.IntVar(&o.LlamaParallel, "llama-parallel", o.LlamaParallel, "llama-server -np slots (its context is slots × the model context)")
	fs.StringVar(&o.LlamaArgs, "llama-args", o.LlamaArgs, "extra llama-server flags")

	fs.StringVar(&o.BackendCmd, "backend-cmd", o.BackendCmd, `command of the "custom" backend; {port}, {host} and {api_key} (--api-key) are substituted, e.g. 'my-server --port {port}'`)
}

// ThirdPartyRun is what a third-party spec needs from the run itself.
type ThirdPartyRun struct {
	Model      string // HF id or directory; "" = gpt2
	ContextLen int    // the servers' max context (traces.Context.ServerMaxLen); 0 = 1024
	GPU        string // CUDA_VISIBLE_DEVICES; "" = inherited
	ServerCPUs string // taskset list the servers are pinned to; sizes OMP/MKL threads
	Root       string // where .venvs/ lives; "" = the module root, else the working directory
	// Getenv reads the harness's environment (tests replace it).
	Getenv func(string) string
	// ProbeTimeout bounds the version probe in each environment (default 15 s).
	ProbeTimeout time.Duration
	// APIKey, when set, is required by the launched server: vLLM, SGLang
	// and llama-server get --api-key, --backend-cmd its {api_key}
	// placeholder; trtllm-serve has no such option and runs open. Requests
	// send it to every backend (Spec.APIKey).
	APIKey string
}

// apiKeyArgs is the --api-key flag of vLLM, SGLang and llama-server.
func (r ThirdPartyRun) apiKeyArgs() []string {
	if r.APIKey == "" {
		return nil
	}
	return []string{"--api-key", r.APIKey}
}

func (r ThirdPartyRun) model() string {
	if r.Model == "" {
		return "gpt2"
	}
	return r.Model
}

func (r ThirdPartyRun) contextLen() int {
	if r.ContextLen <= 0 {
		return 1024
	}
	return r.ContextLen
}

func (r ThirdPartyRun) getenv(k string) string {
	if r.Getenv == nil {
		return os.Getenv(k)
	}
	return r.Getenv(k)
}

func (r ThirdPartyRun) layout() envs.Layout {
	root := r.Root
	if root == "" {
		if m, err := ModuleRoot(); err == nil {
			root = m
		} else if wd, err := os.Getwd(); err == nil {
			root = wd
		}
	}
	return envs.Layout{Root: root}
}

// commonEnv is every launched backend's environment overrides, as the
// original set them: CUDA_VISIBLE_DEVICES from --gpu, OMP and MKL
// thread counts equal to the number of server CPUs (only when pinned: a
// server left unpinned keeps its libraries' own choice), and
// TOKENIZERS_PARALLELISM=false.
func (r ThirdPartyRun) commonEnv() map[string]string {
	env := map[string]string{"TOKENIZERS_PARALLELISM": "false"}
	if r.GPU != "" {
		env["CUDA_VISIBLE_DEVICES"] = r.GPU
	}
	if n := countCPUs(r.ServerCPUs); n > 0 {
		env["OMP_NUM_THREADS"] = strconv.Itoa(n)
		env["MKL_NUM_THREADS"] = strconv.Itoa(n)
	}
	return env
}

// countCPUs counts a taskset list ("0-3,8" = 5); 0 when empty or invalid
// (the run validates the list before any server starts).
func countCPUs(list string) int {
	cpus, err := cpuset.Parse(list)
	if err != nil {
		return 0
	}
	return len(cpus)
}

// IsThirdParty reports whether name is one of the backends built here.
func IsThirdParty(name string) bool {
	switch name {
	case NameVLLM, NameSGLang, NameTRTLLM, NameLlama, NameCustom:
		return true
	}
	return false
}

// Unavailable says why a backend cannot run on this machine and what fixes
// it. The run records it as a skipped backend and goes on with the others.
type Unavailable struct {
	Backend string
	Reason  string
	Fix     string // a command or instruction
}

func (u *Unavailable) Error() string {
	if u.Fix == "" {
		return u.Backend + " skipped: " + u.Reason
	}
	return u.Backend + " skipped: " + u.Reason + " (fix: " + u.Fix + ")"
}

// Record is the by_backend entry of a skipped backend.
func (u *Unavailable) Record() *results.Backend {
	return &results.Backend{Backend: u.Backend, Skipped: true, Error: u.Reason, FixHint: u.Fix}
}

// ThirdParty builds the run spec of one third-party backend. A backend that
// cannot run here (no environment, package missing, no llama-server, no
// --backend-cmd) returns an *Unavailable error; other errors are bad flags.
func ThirdParty(ctx context.Context, name string, o *ThirdPartyOptions, r ThirdPartyRun) (Spec, error) {
	s, err := thirdParty(ctx, name, o, r)
	s.APIKey = r.APIKey
	return s, err
}

func thirdParty(ctx context.Context, name string, o *ThirdPartyOptions, r ThirdPartyRun) (Spec, error) {
	switch name {
	case NameVLLM:
		return VLLM(ctx, o, r)
	case NameSGLang:
		return SGLang(ctx, o, r)
	case NameTRTLLM:
		return TRTLLM(ctx, o, r)
	case NameLlama:
		return Llama(o, r)
	case NameCustom:
		return Custom(o, r)
	}
	return Spec{}, fmt.Errorf("backend %q is not a third-party backend", name)
}

// pythonBackend is a resolved and probed Python environment.
type pythonBackend struct {
	env      envs.Backend
	python   string
	probe    *envs.Probe
	versions map[string]string
	procEnv  map[string]string // common + ProcessEnv
}

// resolvePython finds and probes the interpreter of a Python backend. The
// probe reads package metadata only (no import: that takes up to a minute
// and `bench envs check` does it), so a missing environment or package is
// reported before anything is launched.
func resolvePython(ctx context.Context, name, flagValue string, r ThirdPartyRun) (*pythonBackend, error) {
	eb, err := envs.Lookup(name)
	if err != nil {
		return nil, err
	}
	in := envs.Resolve(eb, flagValue, r.layout(), r.getenv)
	if !in.Found() {
		return nil, &Unavailable{Backend: name, Reason: in.Problem, Fix: in.Fix()}
	}
	pb := &pythonBackend{env: eb, python: in.Path, procEnv: r.commonEnv()}
	for k, v := range envs.ProcessEnv(eb, in.Path, r.getenv("LD_LIBRARY_PATH")) {
		pb.procEnv[k] = v
	}
	p, err := envs.RunProbe(ctx, eb, in.Path, envs.ProbeOptions{Timeout: r.ProbeTimeout, Env: pb.procEnv})
	if err != nil {
		return nil, &Unavailable{Backend: name, Reason: err.Error(), Fix: "bench envs check " + name}
	}
	if !p.Found {
		return nil, &Unavailable{Backend: name, Reason: fmt.Sprintf("%s is not installed in %s (%s)", eb.Module, in.Path, in.Source),
			Fix: envs.SetupCommand(eb)}
	}
	pb.probe = p
	pb.versions = envs.Versions(eb, in.Path, p)
	return pb, nil
}

// version is what meta.versions[label] holds: the package version.
func (pb *pythonBackend) version() string { return pb.versions[pb.env.Dist] }

// dtypeName maps the original's --dtype to the libraries' names ("" for
// auto: no flag).
func dtypeName(dtype string) (string, error) {
	switch dtype {
	case "auto":
		return "", nil
	case "fp16", "", "float16", "half":
		return "float16", nil
	case "bf16", "bfloat16":
		return "bfloat16", nil
	case "fp32", "float32", "float":
		return "float32", nil
	}
	return "", fmt.Errorf("--dtype %q: want auto, fp16, bf16 or fp32", dtype)
}

// extraArgs splits a --<backend>-args value.
func extraArgs(flag, value string) ([]string, error) {
	args, err := SplitArgs(value)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flag, err)
	}
	return args, nil
}
