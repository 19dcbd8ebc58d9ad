package backend

import (
	"context"
	"strconv"

	"github.com/roseinfer/roseinfer/harness/client"
)

// vllmQuirks is the request shape for vLLM 0.13: token-id prompts, top_k
// and ignore_eos as extra fields (accepted; unknown fields are only logged),
// usage in a final choices:[] chunk and continuous usage in every chunk,
// which gives exact tokens per chunk when vLLM merges several tokens into
// one event (vLLM's stream_options.continuous_usage_stats).
var vllmQuirks = client.Quirks{
	PromptAsTokenIDs: true,
	ExtraSampling:    true,
	IncludeUsage:     true,
	ContinuousUsage:  true,
}

// VLLMMaxNumSeqs is the --max-num-seqs a vLLM run gets: the flag's value,
// else 128 with the flashinfer attention backend (the original's guard: vLLM
// 0.13.0 ran out of memory on 12 GB GPUs in sampler warmup), else 0 (no flag,
// vLLM's default).
func VLLMMaxNumSeqs(o *ThirdPartyOptions) int {
	if o.VLLMMaxNumSeqs > 0 {
		return o.VLLMMaxNumSeqs
	}
	if o.VLLMAttentionBackend == "flashinfer" {
		return 128
	}
	return 0
}

// VLLMArgv is the server command after the interpreter, as the original
// built it:
//
//	-m vllm.entrypoints.openai.api_server --model M --host H --port P
//	--max-model-len CTX --disable-log-requests --disable-log-stats
//	--async-scheduling|--no-async-scheduling [--attention-backend B]
//	[--max-num-seqs N] [--dtype D]
//
// then our additions: [--tokenizer T] and --vllm-args.
func VLLMArgv(o *ThirdPartyOptions, r ThirdPartyRun, host string, port int) ([]string, error) {
	dtype, err := dtypeName(o.Dtype)
	if err != nil {
		return nil, err
	}
	extra, err := extraArgs("vllm-args", o.VLLMArgs)
	if err != nil {
		return nil, err
	}
	argv := []string{"-m", "vllm.entrypoints.openai.api_server", "--model", r.model(),
		"--host", host, "--port", strconv.Itoa(port), "--max-model-len", strconv.Itoa(r.contextLen()),
		"--disable-log-requests", "--disable-log-stats"}
	if o.VLLMAsyncScheduling {
		argv = append(argv, "--async-scheduling")
	} else {
		argv = append(argv, "--no-async-scheduling")
	}
	if b := o.VLLMAttentionBackend; b != "" && b != "auto" {
		argv = append(argv, "--attention-backend", b)
	}
	if n := VLLMMaxNumSeqs(o); n > 0 {
		argv = append(argv, "--max-num-seqs", strconv.Itoa(n))
	}
	if dtype != "" {
		argv = append(argv, "--dtype", dtype)
	}
	if o.Tokenizer != "" {
		argv = append(argv, "--tokenizer", o.Tokenizer)
	}
	argv = append(argv, r.apiKeyArgs()...)
	return append(argv, extra...), nil
}

// VLLM is the spec of a vLLM server run from its environment. Readiness is
// the default probe: vLLM binds its port early but listens only once the
// engine is built, so connections are refused while it loads, then /health
// and /v1/models answer 200.
func VLLM(ctx context.Context, o *ThirdPartyOptions, r ThirdPartyRun) (Spec, error) {
	// Check the flags before probing, so a typo is an error, not a skip.
	if _, err := VLLMArgv(o, r, "127.0.0.1", 1); err != nil {
		return Spec{}, err
	}
	pb, err := resolvePython(ctx, NameVLLM, o.VLLMPython, r)
	if err != nil {
		return Spec{}, err
	}
	s := pythonSpec(NameVLLM, pb, vllmQuirks, func(host string, port int) []string {
		argv, _ := VLLMArgv(o, r, host, port) // validated above
		return argv
	})
	s.APIKey = r.APIKey
	return s, nil
}

// pythonSpec assembles the Spec of a server run as `python ARGV...`.
func pythonSpec(label string, pb *pythonBackend, q client.Quirks, argv func(host string, port int) []string) Spec {
	python, version := pb.python, pb.version()
	return Spec{
		Label: label,
		Command: func(host string, port int) []string {
			return append([]string{python}, argv(host, port)...)
		},
		Env:      pb.procEnv,
		Ready:    DefaultReady,
		Quirks:   q,
		Python:   python,
		Versions: pb.versions,
		Version:  func(context.Context) string { return version },
	}
}
