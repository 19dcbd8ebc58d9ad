// Package servers decides which inference servers a run launches and where
// they run: it turns --backends, --variant and --base-url into backend
// specs (Specs) and applies the CPU split between the servers and the
// harness (ApplyCPUSplit). bench online and its profile stage both go
// through it, so profiled servers are the measured ones, started the same
// way on the same CPUs. Launching and stopping a spec is harness/backend's.
package servers

import (
	"time"

	"github.com/roseinfer/roseinfer/harness/backend"
)

// Options are the server flags of bench online. Field comments give the
// flag.
type Options struct {
	Backends     []string // --backends: "roseinfer" (others come with more descriptors)
	BaseURL      string   // --base-url: benchmark a running OpenAI-compatible server instead
	Model        string   // --model: roseinfer checkpoint dir / request model id ("" = the server's)
	Device       string   // --device for roseinfer: cpu, sim, cuda, auto
	ServerArgs   []string // --server-args: extra `roseinfer serve` flags for every roseinfer run
	Variants     []string // --variant LABEL=FLAGS: extra roseinfer runs labelled roseinfer+LABEL
	RoseinferBin string   // --roseinfer-bin; "" = next to bench, $PATH, or go build
	Host         string   // --host
	PortBase     int      // --port-base
	ServerCPUs   string   // --server-cpus (taskset list); "" = the original's split, "none" = no pinning
	ClientCPUs   string   // --client-cpus; "" = the original's split, "none" = no pinning
	GPU          string   // --gpu: CUDA_VISIBLE_DEVICES for launched servers ("" = inherit)
	TimeoutReady time.Duration
	// APIKey (--api-key, else $OPENAI_API_KEY) is sent as a bearer token on
	// every request and passed to the servers launched (backend.Spec.APIKey);
	// never recorded.
	APIKey string
	// ThirdParty holds the vLLM, SGLang, TensorRT-LLM, llama-server and
	// --backend-cmd flags (backend.RegisterThirdPartyFlags).
	ThirdParty backend.ThirdPartyOptions
	EnvsRoot   string // where .venvs/ is; "" = the module root (tests set it)
}
