// Package online drives whole benchmark runs: for `bench online` it loads the
// trace, launches each backend in turn, warms it up, replays the trace at
// every scale (and round), summarises each scale with harness/metrics and
// writes the results files after every scale, so an interrupted run still
// leaves valid JSON of what finished. cmd/bench only parses flags into
// OnlineOptions and calls Online.
package online

import (
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/roseinfer/roseinfer/harness/backend"
)

// OnlineOptions are `bench online`'s settings. Field comments give the
// flag; defaults are in DefaultOnline.
type OnlineOptions struct {
	// Backends and servers.
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
	// ThirdParty holds the vLLM, SGLang, TensorRT-LLM, llama-server and
	// --backend-cmd flags (backend.RegisterThirdPartyFlags).
	ThirdParty backend.ThirdPartyOptions
	EnvsRoot   string // where .venvs/ is; "" = the module root (tests set it)

	// Workload.
	TracePath            string // --trace; "" = the embedded Azure 2023 conversation trace
	TraceFormat          string // --trace-format; "" = detect
	N                    int
	Scales               []float64
	StartOffsetS         float64
	MaxInputLen          int // 0 = not set
	MaxOutputLen         int
	PromptOverheadTokens int
	ModelMaxLen          int // the model's context (GPT-2 and the tiny preset: 1024)
	VocabSize            int
	PrefixMode           string // base | trace
	Seed                 int64
	Temperature          float64
	TopP                 float64
	TopK                 int
	IgnoreEOS            bool
	Endpoint             string // completions (default) or chat

	// Measurement.
	WarmupRequests     int
	WarmupInputLen     int
	WarmupOutputLen    int
	Repeat             int
	RequestTimeout     time.Duration
	SLO                string  // --slo ttft=200ms,tpot=50ms
	SendLagThresholdMs float64 // a scale whose send-lag p99 exceeds it is invalid

	// Output.
	OutputDir string // parent of online_<YYYYmmdd_HHMMSS>/
	RunDir    string // exact run directory (tests); overrides OutputDir
	Log       io.Writer
	Progress  Progress
}

// DefaultOnline returns the defaults: the original's (A.1) except where
// noted, sized so the embedded default (roseinfer on CPU with its tiny model,
// the bundled Azure trace) finishes in minutes on 2 cores.
func DefaultOnline() OnlineOptions {
	return OnlineOptions{
		Backends:             []string{"roseinfer"},
		Device:               "cpu", // original: cuda; a machine without a GPU is the default here
		Host:                 "127.0.0.1",
		PortBase:             18000,
		TimeoutReady:         120 * time.Second,
		N:                    1000,
		Scales:               []float64{0.4, 0.5, 0.6, 0.7, 0.8, 1.6},
		StartOffsetS:         1.0,
		MaxOutputLen:         128,
		PromptOverheadTokens: 8,
		ModelMaxLen:          1024,
		VocabSize:            50257,
		PrefixMode:           "base",
		Seed:                 42,
		Temperature:          0.7,
		TopP:                 0.9,
		TopK:                 50,
		WarmupRequests:       5,
		WarmupInputLen:       128,
		WarmupOutputLen:      32,
		Repeat:               1,
		RequestTimeout:       600 * time.Second, // the OpenAI SDK's default, which the original used
		SendLagThresholdMs:   5,
		OutputDir:            "results/runs",
		ThirdParty:           backend.DefaultThirdParty(),
	}
}

// Validate reports the first setting that cannot work.
func (o *OnlineOptions) Validate() error {
	switch {
	case len(o.Backends) == 0 && o.BaseURL == "":
		return errors.New("no backends to run (--backends is empty)")
	case len(o.Scales) == 0:
		return errors.New("--scales is empty")
	case o.N < 1:
		return fmt.Errorf("--n %d: need at least one request", o.N)
	case o.Repeat < 1:
		return fmt.Errorf("--repeat %d: need at least one round", o.Repeat)
	case o.MaxOutputLen < 0 || o.MaxInputLen < 0:
		return errors.New("--max-input-len and --max-output-len must not be negative")
	case o.ModelMaxLen < 2:
		return fmt.Errorf("model context %d is too small", o.ModelMaxLen)
	case o.WarmupRequests < 0:
		return errors.New("--warmup-requests must not be negative")
	case o.Temperature < 0:
		return errors.New("--temperature must not be negative")
	case o.SendLagThresholdMs <= 0:
		return errors.New("--send-lag-threshold-ms must be positive")
	case o.Endpoint != "" && o.Endpoint != "completions" && o.Endpoint != "chat":
		return fmt.Errorf("--endpoint %q: want completions or chat", o.Endpoint)
	}
	for _, s := range o.Scales {
		if !(s > 0) || math.IsInf(s, 0) {
			return fmt.Errorf("--scales: %v is not a positive number", s)
		}
	}
	return nil
}

// Progress shows how far a run is. Implementations draw bars on a terminal
// or print log lines; nil shows nothing.
type Progress interface {
	// Start begins one (backend, scale, round) replay of total requests.
	Start(label string, scale float64, round, rounds, total int) Bar
}

// Bar is one replay's progress.
type Bar interface {
	Add(n int)
	// Finish ends the bar with a one-line summary.
	Finish(summary string)
}
