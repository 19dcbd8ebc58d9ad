// Package capacity is `bench capacity`: the highest load at which a server
// keeps a given share of requests within every SLO. search.go is the search
// alone, a pure function of the probes' outcomes; capacity.go runs it
// against each backend through the online runner (harness/online) and
// writes capacity.json, its figure and its report section. It imports
// harness/online, harness/report and plots; nothing in harness/ imports it.
package capacity

import (
	"context"
	"fmt"
	"math"
)

// Outcome is what one probe measured.
type Outcome struct {
	Attainment float64 // share of the probe's requests that met every SLO
	// Valid is false when the client fell behind its schedule (send lag):
	// the server was not offered the load being probed, so the probe
	// cannot vouch for it and counts as failed, never as passing.
	Valid bool
}

// SearchOptions configure Search. Loads are in any unit that grows with
// the load (bench capacity uses req/s).
type SearchOptions struct {
	Start     float64 // first load probed
	Target    float64 // least attainment that passes, in (0, 1]
	Tolerance float64 // the search ends when (hi − lo) / lo ≤ Tolerance
	// Factor is the bracketing step: while every probe passed the next is
	// Factor times higher; while every probe failed, Factor times lower.
	Factor float64
	// Confirm is how many more times the answer is probed once the bracket
	// is narrow; every repeat must pass. A probe near the boundary can pass
	// by luck; one that fails on a repeat becomes the upper bound and the
	// search goes on below it.
	Confirm   int
	MaxProbes int
	MaxLoad   float64 // 0 = none: the search never probes above it
	MinLoad   float64 // bracketing down stops here; 0 = Start / 1024
}

// DefaultSearch has the defaults of bench capacity's flags.
func DefaultSearch() SearchOptions {
	return SearchOptions{Target: 0.95, Tolerance: 0.05, Factor: 2, Confirm: 1, MaxProbes: 20}
}

// Validate names the flag of the first unusable setting.
func (o *SearchOptions) Validate() error {
	switch {
	case !(o.Target > 0 && o.Target <= 1):
		return fmt.Errorf("--goodput %v: want a fraction in (0, 1]", o.Target)
	case !(o.Tolerance > 0 && o.Tolerance < 1):
		return fmt.Errorf("--tolerance %v: want a fraction in (0, 1), e.g. 0.05", o.Tolerance)
	case !(o.Start > 0) || math.IsInf(o.Start, 0):
		return fmt.Errorf("--start-rate %v: want a positive number", o.Start)
	case !(o.Factor > 1) || math.IsInf(o.Factor, 0):
		return fmt.Errorf("bracketing factor %v: want a number above 1", o.Factor)
	case o.Confirm < 0:
		return fmt.Errorf("--confirm %d: must not be negative", o.Confirm)
	case o.MaxProbes < 1:
		return fmt.Errorf("--max-probes %d: need at least one probe", o.MaxProbes)
	case o.MaxLoad < 0 || math.IsNaN(o.MaxLoad) || math.IsInf(o.MaxLoad, 0):
		return fmt.Errorf("--max-rate %v: want a positive number, or 0 for none", o.MaxLoad)
	case o.MinLoad < 0 || math.IsNaN(o.MinLoad) || math.IsInf(o.MinLoad, 0):
		return fmt.Errorf("least load %v: must not be negative", o.MinLoad)
	}
	return nil
}

// Passes is the rule every probe is held to: valid, and at least Target
// of its requests met every SLO.
func (o *SearchOptions) Passes(out Outcome) bool {
	return out.Valid && out.Attainment >= o.Target
}

// Phase says why a load was probed.
type Phase string

const (
	PhaseBracket Phase = "bracket" // stepping by Factor until one probe passes and one fails
	PhaseBisect  Phase = "bisect"  // the geometric middle of the bracket
	PhaseConfirm Phase = "confirm" // the answer again
)

// Stop says why the search ended.
type Stop string

const (
	StopConverged Stop = "converged"  // bracket within Tolerance, answer confirmed
	StopMaxLoad   Stop = "max_load"   // every load up to MaxLoad passed: capacity ≥ MaxLoad
	StopMinLoad   Stop = "min_load"   // no load down to MinLoad passed
	StopMaxProbes Stop = "max_probes" // out of probes; Lo and Hi still bound the answer
	StopError     Stop = "error"      // a probe could not run (its error is returned)
)

// Step is one probe.
type Step struct {
	Load    float64
	Phase   Phase
	Outcome Outcome
	Pass    bool
}

// Result is the search's record.
type Result struct {
	Steps []Step
	// Lo is the highest load that passed and was not contradicted by a
	// failure at or below it: the answer. 0 when no load passed.
	Lo float64
	// Hi is the lowest load that failed; 0 when none failed.
	Hi   float64
	Stop Stop
}

// Converged reports whether the answer is within the tolerance.
func (r *Result) Converged() bool { return r.Stop == StopConverged }

// ProbeFunc offers one load and reports what it measured; an error ends
// the search (the server died, the run was interrupted).
type ProbeFunc func(ctx context.Context, load float64, phase Phase) (Outcome, error)

// Search finds the highest load whose probes pass (attainment ≥ Target,
// valid), assuming attainment does not grow with the load: it brackets the
// answer by stepping from Start by Factor, then bisects the bracket at its
// geometric middle (loads span orders of magnitude, and the tolerance is
// relative) until (hi − lo) / lo ≤ Tolerance, then probes the answer
// Confirm more times. The result holds every step, also on error.
func Search(ctx context.Context, o SearchOptions, probe ProbeFunc) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.MinLoad == 0 {
		o.MinLoad = o.Start / 1024
	}
	if o.MaxLoad > 0 {
		o.Start = math.Min(o.Start, o.MaxLoad)
	}
	s := &search{o: o, res: &Result{}}
	for {
		load, phase, stop := s.next()
		if stop != "" {
			s.res.Stop = stop
			return s.res, nil
		}
		if len(s.res.Steps) >= o.MaxProbes {
			s.res.Stop = StopMaxProbes
			return s.res, nil
		}
		out, err := probe(ctx, load, phase)
		if err != nil {
			s.res.Stop = StopError
			return s.res, fmt.Errorf("probe at %.4g: %w", load, err)
		}
		s.record(load, phase, out)
	}
}

type search struct {
	o         SearchOptions
	res       *Result
	confirmed int // passing repeats of res.Lo
}

// next is the load to probe, or why to stop.
func (s *search) next() (float64, Phase, Stop) {
	o, lo, hi := &s.o, s.res.Lo, s.res.Hi
	switch {
	case lo == 0 && hi == 0:
		return o.Start, PhaseBracket, ""
	case lo == 0: // every probe failed: step down
		if hi <= o.MinLoad {
			return 0, "", StopMinLoad
		}
		return math.Max(hi/o.Factor, o.MinLoad), PhaseBracket, ""
	case hi == 0: // every probe passed: step up
		if o.MaxLoad > 0 && lo >= o.MaxLoad {
			return 0, "", StopMaxLoad
		}
		x := lo * o.Factor
		if o.MaxLoad > 0 {
			x = math.Min(x, o.MaxLoad)
		}
		return x, PhaseBracket, ""
	case hi > lo*(1+o.Tolerance):
		return math.Sqrt(lo * hi), PhaseBisect, ""
	case s.confirmed < o.Confirm:
		return lo, PhaseConfirm, ""
	}
	return 0, "", StopConverged
}

// record applies one probe's outcome to the bracket.
func (s *search) record(load float64, phase Phase, out Outcome) {
	pass := s.o.Passes(out)
	r := s.res
	r.Steps = append(r.Steps, Step{Load: load, Phase: phase, Outcome: out, Pass: pass})
	if pass {
		switch {
		case load == r.Lo:
			s.confirmed++
		case load > r.Lo:
			r.Lo, s.confirmed = load, 0
		}
		return
	}
	if r.Hi == 0 || load < r.Hi {
		r.Hi = load
	}
	if load <= r.Lo {
		// The answer failed on a repeat: fall back to the highest load
		// below it that passed, which must be confirmed in its turn.
		r.Lo, s.confirmed = 0, 0
		for _, st := range r.Steps {
			if st.Pass && st.Load < load && st.Load > r.Lo {
				r.Lo = st.Load
			}
		}
	}
}
