package backend

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"

	"github.com/roseinfer/roseinfer/harness/client"
)

// llamaQuirks is the request shape for llama.cpp's llama-server: token-id
// prompts and the extras it reads (top_k, ignore_eos). It puts usage (and
// timings) in its last chunk on its own, one token per chunk, so no
// stream_options are sent and the client counts by the server's total
// (llama.cpp's tools/server/README.md, POST /completion).
var llamaQuirks = client.Quirks{
	PromptAsTokenIDs: true,
	ExtraSampling:    true,
}

// LlamaArgv is the llama-server command, set up as the other servers are
// (every layer on the GPU, flash attention, one slot per concurrent request):
//
//	llama-server -m MODEL --host H --port P -c CTX*N -np N -ngl all -fa on --no-webui
//
// -c is the KV size shared by all N slots, so each slot gets the model
// context; then --llama-args.
func LlamaArgv(o *ThirdPartyOptions, r ThirdPartyRun, bin, host string, port int) ([]string, error) {
	if o.LlamaParallel < 1 {
		return nil, fmt.Errorf("--llama-parallel %d: need at least one slot", o.LlamaParallel)
	}
	extra, err := extraArgs("llama-args", o.LlamaArgs)
	if err != nil {
		return nil, err
	}
	argv := []string{bin, "-m", o.LlamaModel, "--host", host, "--port", strconv.Itoa(port),
		"-c", strconv.Itoa(r.contextLen() * o.LlamaParallel), "-np", strconv.Itoa(o.LlamaParallel),
		"-ngl", "all", "-fa", "on", "--no-webui"}
	argv = append(argv, r.apiKeyArgs()...)
	return append(argv, extra...), nil
}

// Llama is the spec of a llama-server (label "llama"). While it loads,
// /health answers 503 {"error":{"code":503,"message":"Loading model"}}; the
// default probe waits for 200. Its model id is the file name (or alias), so
// requests use the id it lists.
func Llama(o *ThirdPartyOptions, r ThirdPartyRun) (Spec, error) {
	if _, err := LlamaArgv(o, r, "llama-server", "127.0.0.1", 1); err != nil {
		return Spec{}, err
	}
	bin := o.LlamaServerBin
	if bin == "" {
		p, err := exec.LookPath("llama-server")
		if err != nil {
			return Spec{}, &Unavailable{Backend: NameLlama, Reason: "llama-server is not on PATH",
				Fix: "build llama.cpp with -DGGML_CUDA=ON and pass --llama-server-bin PATH"}
		}
		bin = p
	} else if !isExecutable(bin) {
		return Spec{}, &Unavailable{Backend: NameLlama, Reason: fmt.Sprintf("--llama-server-bin %s is not an executable file", bin),
			Fix: "pass the llama-server executable of a llama.cpp build"}
	}
	if o.LlamaModel == "" {
		return Spec{}, &Unavailable{Backend: NameLlama, Reason: "no --llama-model",
			Fix: "convert the model with llama.cpp's convert_hf_to_gguf.py --outtype f16 and pass --llama-model FILE.gguf"}
	}
	if _, err := os.Stat(o.LlamaModel); err != nil {
		return Spec{}, &Unavailable{Backend: NameLlama, Reason: fmt.Sprintf("--llama-model: %v", err),
			Fix: "pass an existing GGUF file with --llama-model"}
	}
	return Spec{
		Label: NameLlama,
		Command: func(host string, port int) []string {
			argv, _ := LlamaArgv(o, r, bin, host, port)
			return argv
		},
		Env:             r.commonEnv(),
		Ready:           DefaultReady,
		Quirks:          llamaQuirks,
		APIKey:          r.APIKey,
		ModelFromServer: true,
		Version:         func(ctx context.Context) string { return ProbeVersion(ctx, bin) },
	}, nil
}
