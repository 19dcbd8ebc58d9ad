// Package backend describes the servers the harness benchmarks and runs
// their lifecycle: pick a port, launch the command in its own process group
// with its log in the run directory, wait until it answers, notice when it
// dies, and stop the whole group (SIGTERM, then SIGKILL) on every exit path.
//
// A backend is a Spec value: roseinfer, a server someone else runs
// (--base-url), and later vLLM, SGLang, TensorRT-LLM or llama-server are each
// one more constructor returning a Spec. The package knows nothing about
// traces or metrics.
package backend

import (
	"context"
	"strings"
	"time"

	"github.com/roseinfer/roseinfer/harness/client"
)

// Spec describes one run spec (one label in the results).
type Spec struct {
	// Label names the run in results and tables: "roseinfer",
	// "roseinfer+nocache", "vllm", "openai".
	Label string
	// Command builds the server's argv for the chosen host and port; nil for
	// a server the harness does not launch (BaseURL must then be set).
	Command func(host string, port int) []string
	// Env holds environment overrides for the server process (the rest of
	// the harness's environment is inherited).
	Env map[string]string
	// BaseURL is the root of a server that is not launched.
	BaseURL string
	// Ready says when a server accepts requests.
	Ready ReadyRule
	// Quirks shape the request body for this server.
	Quirks client.Quirks
	// ModelFromServer sends the model id the server reports on /v1/models
	// instead of the --model value (roseinfer serves whatever it loaded).
	ModelFromServer bool
	// StopGrace is how long SIGTERM gets before SIGKILL (default 15 s, as
	// the original).
	StopGrace time.Duration
	// Version probes the server's version ("" when unknown); optional.
	Version func(ctx context.Context) string
	// Python is the interpreter of a server run from a Python environment
	// (vLLM, SGLang, TensorRT-LLM; results.Backend.Python); "" otherwise.
	Python string
	// Versions are extra meta.versions entries probed for this backend
	// (vllm_python, vllm_python_version, vllm_torch, ...); optional.
	Versions map[string]string
	// AfterStop, when set, runs after the process group is gone, with the
	// server's host and port: TensorRT-LLM's server can leave a process
	// outside the group (it may move into a new session).
	AfterStop func(host string, port int)
	// APIKey is the bearer key the server requires ("" = none): readiness
	// probes, requests and profiler calls send it as Authorization: Bearer,
	// and the argv recorded in results and the log shows it as ***.
	APIKey string
}

// Redacted is the placeholder a secret becomes wherever a command line is
// recorded.
const Redacted = "***"

// RedactArgv returns argv with every occurrence of secret (a whole
// argument, or part of one such as --api-key=KEY) replaced by ***.
func RedactArgv(argv []string, secret string) []string {
	if secret == "" || argv == nil {
		return argv
	}
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = strings.ReplaceAll(a, secret, Redacted)
	}
	return out
}

// ReadyRule is a readiness probe: every path in Paths must answer HTTP 200,
// probed every Interval with ProbeTimeout per request.
type ReadyRule struct {
	Paths        []string
	Interval     time.Duration
	ProbeTimeout time.Duration
}

// DefaultReady is the original's probe timing: every 0.2 s, 2 s per probe;
// /health then /v1/models.
var DefaultReady = ReadyRule{
	Paths:        []string{"/health", "/v1/models"},
	Interval:     200 * time.Millisecond,
	ProbeTimeout: 2 * time.Second,
}

// Launched reports whether the harness starts this backend's process.
func (s *Spec) Launched() bool { return s.Command != nil }

func (s *Spec) stopGrace() time.Duration {
	if s.StopGrace > 0 {
		return s.StopGrace
	}
	return 15 * time.Second
}

// OpenAI is a server someone else runs, reached at baseURL; it is probed
// for readiness but never started or stopped. The request shape is the
// common subset vLLM and SGLang accept, with token-id prompts and usage.
func OpenAI(label, baseURL, apiKey string) Spec {
	return Spec{
		Label:   label,
		BaseURL: baseURL,
		APIKey:  apiKey,
		Ready:   ReadyRule{Paths: []string{"/v1/models"}, Interval: DefaultReady.Interval, ProbeTimeout: DefaultReady.ProbeTimeout},
		Quirks: client.Quirks{
			PromptAsTokenIDs: true,
			ExtraSampling:    true,
			IncludeUsage:     true,
			ContinuousUsage:  true,
		},
	}
}
