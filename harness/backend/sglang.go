package backend

import (
	"context"
	"strconv"
	"time"

	"github.com/roseinfer/roseinfer/harness/client"
)

// sglangQuirks is the request shape for SGLang 0.5.7: the same fields as
// vLLM (token-id prompts, top_k, ignore_eos, stream_options with continuous
// usage), as SGLang's OpenAI-compatible completions API takes them.
var sglangQuirks = client.Quirks{
	PromptAsTokenIDs: true,
	ExtraSampling:    true,
	IncludeUsage:     true,
	ContinuousUsage:  true,
}

// SGLangReady is SGLang's readiness: /health answers 503 until the server's
// own warm-up request finished, while /v1/models already answers 200, so
// both must answer 200. With SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=0 a
// 200 from /health generates nothing; the probe stops once ready, so it
// never runs during a measurement.
var SGLangReady = ReadyRule{
	Paths:        []string{"/health", "/v1/models"},
	Interval:     200 * time.Millisecond,
	ProbeTimeout: 2 * time.Second,
}

// SGLangArgv is the server command after the interpreter, as the original
// built it:
//
//	-m sglang.launch_server --model-path M --host H --port P
//	--context-length CTX --stream-interval 1 --stream-output
//	[--attention-backend B] [--sampling-backend S] [--dtype D]
//
// then our additions: [--tokenizer-path T] [--max-running-requests N] and
// --sglang-args.
func SGLangArgv(o *ThirdPartyOptions, r ThirdPartyRun, host string, port int) ([]string, error) {
	dtype, err := dtypeName(o.Dtype)
	if err != nil {
		return nil, err
	}
	extra, err := extraArgs("sglang-args", o.SGLangArgs)
	if err != nil {
		return nil, err
	}
	argv := []string{"-m", "sglang.launch_server", "--model-path", r.model(),
		"--host", host, "--port", strconv.Itoa(port), "--context-length", strconv.Itoa(r.contextLen()),
		"--stream-interval", "1", "--stream-output"}
	if o.SGLangAttentionBackend != "" {
		argv = append(argv, "--attention-backend", o.SGLangAttentionBackend)
	}
	if o.SGLangSamplingBackend != "" {
		argv = append(argv, "--sampling-backend", o.SGLangSamplingBackend)
	}
	if dtype != "" {
		argv = append(argv, "--dtype", dtype)
	}
	if o.Tokenizer != "" {
		argv = append(argv, "--tokenizer-path", o.Tokenizer)
	}
	if o.SGLangMaxRunningRequests > 0 {
		argv = append(argv, "--max-running-requests", strconv.Itoa(o.SGLangMaxRunningRequests))
	}
	argv = append(argv, r.apiKeyArgs()...)
	return append(argv, extra...), nil
}

// SGLang is the spec of an SGLang server run from its environment.
func SGLang(ctx context.Context, o *ThirdPartyOptions, r ThirdPartyRun) (Spec, error) {
	if _, err := SGLangArgv(o, r, "127.0.0.1", 1); err != nil {
		return Spec{}, err
	}
	pb, err := resolvePython(ctx, NameSGLang, o.SGLangPython, r)
	if err != nil {
		return Spec{}, err
	}
	// /health must not inject a generation request if anything probes it
	// after readiness: SGLang's /health runs a one-token generation unless
	// this is "0".
	pb.procEnv["SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION"] = "0"
	s := pythonSpec(NameSGLang, pb, sglangQuirks, func(host string, port int) []string {
		argv, _ := SGLangArgv(o, r, host, port)
		return argv
	})
	s.Ready = SGLangReady
	s.APIKey = r.APIKey
	return s, nil
}
