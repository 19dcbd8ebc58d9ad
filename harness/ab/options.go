// Package ab runs `bench ab`: the same workload against two servers on one
// machine, in interleaved rounds (Order), and judges B against A by the
// ratio of each figure with a bootstrap interval (harness/bootstrap) and
// bench compare's --fail-on rules (harness/report). A side is a roseinfer
// executable, a git commit it builds, or the base URL of a running server.
//
// Run measures and writes online_results.json (sides labelled A and B,
// every request's record, per-round and pooled summaries), then Analyze
// reads those records back and writes ab.json and ab.md, so a finished run
// can be judged again (other rules, more resamples) without re-running it.
// cmd/bench only parses flags into Options. Nothing in harness/ imports ab.
package ab

import (
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/roseinfer/roseinfer/harness/backend"
	"github.com/roseinfer/roseinfer/harness/bootstrap"
	"github.com/roseinfer/roseinfer/harness/report"
	"github.com/roseinfer/roseinfer/harness/servers"
	"github.com/roseinfer/roseinfer/harness/workload"
)

// Options are `bench ab`'s settings. Defaults are in DefaultOptions.
type Options struct {
	A, B SideSpec
	// Repo is the git repository commits are read from (--repo; "" = the
	// roseinfer module's source tree).
	Repo string
	// Servers holds what both sides share: device, model, serve flags,
	// host, ports, CPU split, readiness timeout, API key. Backends,
	// BaseURL, Variants and RoseinferBin are not used.
	Servers  servers.Options
	Workload workload.Options
	Load     Load
	Stats    Stats
	Output   Output
}

// Load is how hard and how long each side is driven. Field comments give
// the flag.
type Load struct {
	Scales             []float64     // --scales: trace time multipliers; every scale gets all its round pairs
	Pairs              int           // --rounds: rounds per side, i.e. round pairs
	StartOffsetS       float64       // --start-offset-s
	RequestTimeout     time.Duration // --request-timeout-s (0 = none)
	SendLagThresholdMs float64       // --send-lag-threshold-ms: rounds past it are named in the warnings
}

// Stats is how the ratios are judged.
type Stats struct {
	Iterations int    // --bootstrap-iterations
	Seed       uint64 // --bootstrap-seed
	// Rules are --fail-on's (report.ParseFailOn or report.DefaultRules);
	// none: report only.
	Rules []report.CompareRule
	// MinSuccessRate (--min-success-rate): B below it at a scale is a
	// regression; A below it leaves the comparison unusable.
	MinSuccessRate float64
}

// Output is where a run writes.
type Output struct {
	OutputDir string // parent of ab_<YYYYmmdd_HHMMSS>/
	RunDir    string // exact run directory (tests); overrides OutputDir
	Log       io.Writer
}

// DefaultOptions are bench online's server and workload defaults, one scale
// and 16 rounds a side (8 ABBA blocks): on the embedded default (roseinfer
// on the CPU) a round replays the first 50 requests of the bundled Azure
// trace, 26.5 s of it, at scale 0.4 (10.6 s), so the 32 rounds take about 6
// minutes. Many short rounds judge better than a few long ones (docs/AB.md).
func DefaultOptions() Options {
	w := workload.DefaultOptions()
	w.N, w.MaxOutputLen = 50, 64
	return Options{
		Servers: servers.Options{
			Device:       "cpu",
			Host:         "127.0.0.1",
			PortBase:     18000,
			TimeoutReady: 120 * time.Second,
			ThirdParty:   backend.DefaultThirdParty(),
		},
		Workload: w,
		Load: Load{
			Scales:             []float64{0.4},
			Pairs:              16,
			StartOffsetS:       1.0,
			RequestTimeout:     600 * time.Second,
			SendLagThresholdMs: 5,
		},
		Stats: Stats{Iterations: bootstrap.DefaultIterations, Seed: 1, Rules: report.DefaultRules(),
			MinSuccessRate: 0.99},
		Output: Output{OutputDir: "results/runs"},
	}
}

// Validate reports the first setting that cannot work (the sides are
// checked when they are resolved).
func (o *Options) Validate() error {
	switch {
	case len(o.Load.Scales) == 0:
		return errors.New("--scales is empty")
	case o.Load.Pairs < 2*pairsPerBlock:
		return fmt.Errorf("--rounds %d: need at least %d rounds per side, two ABBA blocks (the interval needs the spread between blocks)",
			o.Load.Pairs, 2*pairsPerBlock)
	case o.Workload.N < 1:
		return fmt.Errorf("--n %d: need at least one request", o.Workload.N)
	case o.Workload.MaxOutputLen < 0 || o.Workload.MaxInputLen < 0:
		return errors.New("--max-input-len and --max-output-len must not be negative")
	case o.Workload.WarmupRequests < 0:
		return errors.New("--warmup-requests must not be negative")
	case o.Workload.Temperature < 0:
		return errors.New("--temperature must not be negative")
	case o.Load.SendLagThresholdMs <= 0:
		return errors.New("--send-lag-threshold-ms must be positive")
	case o.Workload.Endpoint != "" && o.Workload.Endpoint != "completions" && o.Workload.Endpoint != "chat":
		return fmt.Errorf("--endpoint %q: want completions or chat", o.Workload.Endpoint)
	}
	if err := o.Stats.Validate(); err != nil {
		return err
	}
	for _, s := range o.Load.Scales {
		if !(s > 0) || math.IsInf(s, 0) {
			return fmt.Errorf("--scales: %v is not a positive number", s)
		}
	}
	return nil
}

// Validate reports the first judging setting that cannot work.
func (s *Stats) Validate() error {
	switch {
	case s.Iterations < 100:
		return fmt.Errorf("--bootstrap-iterations %d: need at least 100", s.Iterations)
	case !(s.MinSuccessRate >= 0 && s.MinSuccessRate <= 1):
		return fmt.Errorf("--min-success-rate %v: want a fraction in [0, 1]", s.MinSuccessRate)
	}
	return nil
}
