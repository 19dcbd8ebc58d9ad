// Package online drives `bench online`: it loads the workload
// (harness/workload), launches each backend in turn (harness/servers,
// harness/backend), warms it up, replays the trace at every scale (and
// round), summarises each scale with harness/metrics and writes the results
// files after every scale, so an interrupted run still leaves valid JSON of
// what finished. cmd/bench only parses flags into OnlineOptions and calls
// Online; harness/capacity drives the same runner one replay at a time
// (Runner). Nothing else in harness/ imports it.
package online

import (
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/roseinfer/roseinfer/harness/backend"
	"github.com/roseinfer/roseinfer/harness/servers"
	"github.com/roseinfer/roseinfer/harness/workload"
)

// OnlineOptions are `bench online`'s settings, grouped by concern so each
// step takes only what it needs: the servers, the workload, the load, the
// output. Defaults are in DefaultOnline.
type OnlineOptions struct {
	Servers  servers.Options  // which servers, their flags, ports and CPUs
	Workload workload.Options // the trace, its prompts, sampling, warmup requests
	Load     Load             // scales, rounds, schedule offset, timeouts, SLO, validity
	Output   Output           // where results and progress go
}

// Load is how hard and how long each server is driven, and when a replay
// counts. Field comments give the flag.
type Load struct {
	Scales             []float64     // --scales: trace time multipliers, one replay each
	Repeat             int           // --repeat: rounds per scale
	StartOffsetS       float64       // --start-offset-s: added to every scheduled time
	RequestTimeout     time.Duration // --request-timeout-s (0 = none)
	SLO                string        // --slo ttft=200ms,tpot=50ms
	SendLagThresholdMs float64       // a scale whose send-lag p99 exceeds it is invalid
	// MinSuccessRate (--min-success-rate): a scale whose success rate is
	// below it fails the run (after its results are written).
	MinSuccessRate float64
	// PrewarmConns (--prewarm-conns) caps the connections opened before
	// each round (replay.PoolSize of its schedule); 0 opens none.
	PrewarmConns int
}

// Output is where a run writes.
type Output struct {
	OutputDir string // parent of online_<YYYYmmdd_HHMMSS>/
	RunDir    string // exact run directory (tests); overrides OutputDir
	Kind      string // the run directory's prefix: "" = online (bench capacity: capacity)
	Log       io.Writer
	Progress  Progress
	// Timeline (--timeline): capture roseinfer's engine steps around each
	// round and write timeline.json (harness/timeline).
	Timeline bool
}

// DefaultOnline returns the defaults: the original's except where
// noted, sized so the embedded default (roseinfer on CPU with its tiny model,
// the bundled Azure trace) finishes in minutes on 2 cores.
func DefaultOnline() OnlineOptions {
	return OnlineOptions{
		Servers: servers.Options{
			Backends:     []string{"roseinfer"},
			Device:       "cpu", // original: cuda; a machine without a GPU is the default here
			Host:         "127.0.0.1",
			PortBase:     18000,
			TimeoutReady: 120 * time.Second,
			ThirdParty:   backend.DefaultThirdParty(),
		},
		Workload: workload.DefaultOptions(),
		Load: Load{
			Scales:             []float64{0.4, 0.5, 0.6, 0.7, 0.8, 1.6},
			Repeat:             1,
			StartOffsetS:       1.0,
			RequestTimeout:     600 * time.Second, // the OpenAI SDK's default, which the original used
			SendLagThresholdMs: 5,
			MinSuccessRate:     0.99,
			PrewarmConns:       DefaultPrewarmConns,
		},
		Output: Output{OutputDir: "results/runs"},
	}
}

// DefaultPrewarmConns is --prewarm-conns's default: room for the 2,000
// concurrent streams of harness/cpu_numbers.sh twice over. Each connection
// is a file descriptor here and one in the server; a Prewarm that runs out
// of them is reported and the round runs with what opened.
const DefaultPrewarmConns = 4096

// Validate reports the first setting that cannot work.
func (o *OnlineOptions) Validate() error {
	if len(o.Load.Scales) == 0 {
		return errors.New("--scales is empty")
	}
	return o.validateRun()
}

// validateRun checks all but the scales, which a Runner's caller may choose
// as it goes.
func (o *OnlineOptions) validateRun() error {
	switch {
	case len(o.Servers.Backends) == 0 && o.Servers.BaseURL == "":
		return errors.New("no backends to run (--backends is empty)")
	case o.Workload.N < 1:
		return fmt.Errorf("--n %d: need at least one request", o.Workload.N)
	case o.Load.Repeat < 1:
		return fmt.Errorf("--repeat %d: need at least one round", o.Load.Repeat)
	case o.Workload.MaxOutputLen < 0 || o.Workload.MaxInputLen < 0:
		return errors.New("--max-input-len and --max-output-len must not be negative")
	case o.Workload.ModelMaxLen < 0 || o.Workload.ModelMaxLen == 1:
		return fmt.Errorf("model context %d is too small", o.Workload.ModelMaxLen)
	case o.Workload.WarmupRequests < 0:
		return errors.New("--warmup-requests must not be negative")
	case o.Workload.Temperature < 0:
		return errors.New("--temperature must not be negative")
	case !(o.Load.MinSuccessRate >= 0 && o.Load.MinSuccessRate <= 1):
		return fmt.Errorf("--min-success-rate %v: want a fraction in [0, 1]", o.Load.MinSuccessRate)
	case o.Load.PrewarmConns < 0:
		return fmt.Errorf("--prewarm-conns %d must not be negative (0 opens none)", o.Load.PrewarmConns)
	case o.Load.SendLagThresholdMs <= 0:
		return errors.New("--send-lag-threshold-ms must be positive")
	case o.Workload.Endpoint != "" && o.Workload.Endpoint != "completions" && o.Workload.Endpoint != "chat":
		return fmt.Errorf("--endpoint %q: want completions or chat", o.Workload.Endpoint)
	}
	for _, s := range o.Load.Scales {
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
