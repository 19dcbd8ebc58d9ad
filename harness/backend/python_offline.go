package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/roseinfer/roseinfer/envs"
	"github.com/roseinfer/roseinfer/harness/metrics"
	"github.com/roseinfer/roseinfer/results"
)

// OfflineJob is the job file an offline driver reads (envs/offline_common.py).
type OfflineJob struct {
	Backend            string         `json:"backend"` // the result's label
	Model              string         `json:"model"`
	Tokenizer          string         `json:"tokenizer,omitempty"`
	Dtype              *string        `json:"dtype"` // null: the library's auto
	PromptTokenIDs     [][]int32      `json:"prompt_token_ids"`
	OutputLen          int            `json:"output_len"`
	Temperature        float64        `json:"temperature"`
	TopP               float64        `json:"top_p"`
	TopK               int            `json:"top_k"`
	IgnoreEOS          bool           `json:"ignore_eos"`
	Seed               int64          `json:"seed"`
	TensorParallelSize int            `json:"tensor_parallel_size"`
	MaxBatchSize       int            `json:"max_batch_size"`
	WarmupPrompts      int            `json:"warmup_prompts"`
	SkipWarmup         bool           `json:"skip_warmup"`
	VLLM               map[string]any `json:"vllm"`
	SGLang             map[string]any `json:"sglang"`
	TRTLLM             map[string]any `json:"trtllm"`
}

// OfflineSettings are the workload of one offline run, the same for every
// backend.
type OfflineSettings struct {
	Label              string // default: the backend name
	Prompts            [][]int32
	OutputLen          int
	Temperature        float64
	TopP               float64
	TopK               int
	IgnoreEOS          bool
	Seed               int64
	TensorParallelSize int // default 1
	MaxBatchSize       int // TensorRT-LLM max_batch_size (the original's --max-batch-size)
	WarmupPrompts      int
	SkipWarmup         bool
	RunDir             string
	Timeout            time.Duration // 0: none
	// Prefix pins the driver, e.g. taskset -c 0-3 (as the original ran its
	// offline children under taskset).
	Prefix []string
}

// offlineJob builds the job of a Python backend from the options.
func offlineJob(name string, o *ThirdPartyOptions, r ThirdPartyRun, s OfflineSettings, label string) (OfflineJob, error) {
	dtype, err := dtypeName(o.Dtype)
	if err != nil {
		return OfflineJob{}, err
	}
	job := OfflineJob{Backend: label, Model: r.model(), Tokenizer: o.Tokenizer, PromptTokenIDs: s.Prompts,
		OutputLen: s.OutputLen, Temperature: s.Temperature, TopP: s.TopP, TopK: s.TopK, IgnoreEOS: s.IgnoreEOS,
		Seed: s.Seed, TensorParallelSize: max(1, s.TensorParallelSize), MaxBatchSize: s.MaxBatchSize,
		WarmupPrompts: s.WarmupPrompts, SkipWarmup: s.SkipWarmup,
		VLLM: map[string]any{}, SGLang: map[string]any{}, TRTLLM: map[string]any{}}
	if dtype != "" {
		job.Dtype = &dtype
	}
	switch name {
	case NameVLLM:
		var attention any
		if b := o.VLLMAttentionBackend; b != "" && b != "auto" {
			attention = b
		}
		var seqs any
		if n := VLLMMaxNumSeqs(o); n > 0 {
			seqs = n
		}
		job.VLLM = map[string]any{"attention_backend": attention, "max_num_seqs": seqs, "async_scheduling": o.VLLMAsyncScheduling}
	case NameSGLang:
		job.SGLang = map[string]any{"attention_backend": o.SGLangAttentionBackend, "sampling_backend": o.SGLangSamplingBackend}
	case NameTRTLLM:
		if _, err := TRTLLMArgv(o, r, "127.0.0.1", 1); err != nil {
			return OfflineJob{}, err
		}
		if o.TRTLLMBackend == "_autodeploy" {
			return OfflineJob{}, fmt.Errorf("--trtllm-backend _autodeploy has no offline driver (tensorrt, trt or pytorch)")
		}
		job.TRTLLM = map[string]any{"backend": o.TRTLLMBackend}
	default:
		return OfflineJob{}, fmt.Errorf("backend %q has no offline driver (vllm, sglang, trtllm)", name)
	}
	return job, nil
}

// RunOffline measures one Python backend's offline throughput with its
// driver (envs/<name>_offline.py) in its environment, on exactly the given
// prompt token ids. It always returns a result: a backend that cannot run
// here comes back zeroed with extra.skipped, extra.error and extra.fix_hint;
// a driver that fails (import error, out of memory, crash) comes back zeroed
// with extra.error (its exception and last output lines), extra.exit_code
// and extra.error_kind ("oom", "import", "timeout", "crash"), total_s = the
// driver's wall time, as the original. The throughputs of a good run are
// recomputed from its counts by harness/metrics.
func RunOffline(ctx context.Context, name string, o *ThirdPartyOptions, r ThirdPartyRun, s OfflineSettings) results.OfflineResult {
	label := s.Label
	if label == "" {
		label = name
	}
	res := results.OfflineResult{Backend: label, Model: r.model(), Device: "cuda", NumPrompts: len(s.Prompts),
		OutputLen: s.OutputLen, Extra: map[string]any{}}
	for _, p := range s.Prompts {
		res.TotalInputTokens += len(p)
	}
	if len(s.Prompts) > 0 {
		res.InputLen = res.TotalInputTokens / len(s.Prompts)
	}
	job, err := offlineJob(name, o, r, s, label)
	if err != nil {
		res.Extra["error"] = err.Error()
		return res
	}
	pb, err := resolvePython(ctx, name, pythonFlag(name, o), r)
	if err != nil {
		res.Extra["error"] = err.Error()
		var u *Unavailable
		if errors.As(err, &u) {
			res.Extra["error"], res.Extra["skipped"], res.Extra["fix_hint"] = u.Reason, true, u.Fix
		}
		return res
	}
	if name == NameTRTLLM {
		trtllmEnv(pb.procEnv, o, r)
	}
	out := envs.RunDriver(ctx, envs.DriverRun{Backend: pb.env, Python: pb.python, Prefix: s.Prefix, Env: pb.procEnv,
		Dir: s.RunDir, Label: label, Job: job, Timeout: s.Timeout})
	return offlineResult(res, out, pb)
}

// pythonFlag is the --<name>-python value.
func pythonFlag(name string, o *ThirdPartyOptions) string {
	switch name {
	case NameVLLM:
		return o.VLLMPython
	case NameSGLang:
		return o.SGLangPython
	case NameTRTLLM:
		return o.TRTLLMPython
	}
	return ""
}

// offlineResult merges a driver's outcome into the pre-filled result.
func offlineResult(res results.OfflineResult, out envs.DriverOutcome, pb *pythonBackend) results.OfflineResult {
	var got results.OfflineResult
	if out.Result != nil {
		if err := json.Unmarshal(out.Result, &got); err != nil {
			out.Result = nil
		}
	}
	driverError, _ := got.Extra["error"].(string)
	ok := out.Err == nil && out.Result != nil && driverError == ""
	if ok {
		label := res.Backend
		res = got
		res.Backend = label
		metrics.FillOffline(&res)
	}
	if res.Extra == nil {
		res.Extra = map[string]any{}
	}
	for k, v := range got.Extra {
		if _, set := res.Extra[k]; !set {
			res.Extra[k] = v
		}
	}
	res.Extra["cmd"] = out.Argv
	res.Extra["env"] = pb.procEnv
	res.Extra["python"] = pb.python
	res.Extra["versions"] = pb.versions
	res.Extra["log_path"] = out.LogPath
	res.Extra["wall_s"] = out.WallS
	if ok {
		return res
	}
	// A failed run: zeroed figures, total_s = the driver's wall time.
	res.TotalOutputTokens, res.PrefillS, res.DecodeS = 0, nil, nil
	res.TotalS = out.WallS
	res.RequestThroughputRPS, res.OutputThroughputTPS, res.TotalThroughputTPS = 0, 0, 0
	res.Extra["exit_code"] = out.ExitCode
	var msg []string
	if driverError != "" {
		msg = append(msg, driverError)
	}
	if out.Err != nil {
		msg = append(msg, out.Err.Error())
	} else if out.Result == nil {
		msg = append(msg, "driver printed no result")
	}
	kind := failureKind(driverError+"\n"+out.Tail, out.Err)
	if kind == "oom" && !strings.Contains(strings.ToLower(strings.Join(msg, " ")), "out of memory") {
		msg = append([]string{"out of memory"}, msg...)
	}
	if out.Tail != "" {
		msg = append(msg, "--- last lines of "+out.LogPath+" ---\n"+out.Tail)
	}
	res.Extra["error"] = strings.Join(msg, "\n")
	res.Extra["error_kind"] = kind
	return res
}

// failureKind classifies a driver failure from its output.
func failureKind(text string, err error) string {
	low := strings.ToLower(text)
	switch {
	case strings.Contains(low, "out of memory") || strings.Contains(text, "OutOfMemoryError") ||
		strings.Contains(text, "CUDA_ERROR_OUT_OF_MEMORY"):
		return "oom"
	case strings.Contains(text, "ModuleNotFoundError") || strings.Contains(text, "ImportError"):
		return "import"
	case err != nil && strings.Contains(err.Error(), "timed out"):
		return "timeout"
	}
	return "crash"
}
