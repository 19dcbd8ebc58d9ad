package capacity

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
)

// linearDrop is a synthetic monotone attainment: every request meets the
// SLO up to load knee, then the share falls linearly to 0 at 2·knee.
// Attainment ≥ target exactly up to knee·(2 − target).
func linearDrop(knee float64) func(float64) float64 {
	return func(x float64) float64 {
		return math.Max(0, math.Min(1, 2-x/knee))
	}
}

// probeOf turns an attainment curve into a ProbeFunc (always valid) and
// counts its calls.
func probeOf(f func(float64) float64, calls *int) ProbeFunc {
	return func(_ context.Context, load float64, _ Phase) (Outcome, error) {
		*calls++
		return Outcome{Attainment: f(load), Valid: true}, nil
	}
}

// The answer lies within the tolerance below the true capacity, wherever
// the search starts from, and the bracket is as narrow as asked.
func TestSearchFindsCapacityWithinTolerance(t *testing.T) {
	cases := []struct {
		name          string
		knee, start   float64
		target, tol   float64
		wantMaxProbes int
	}{
		{"start below", 40, 3, 0.95, 0.05, 14},
		{"start above", 40, 900, 0.95, 0.05, 14},
		{"start at the answer", 40, 42, 0.95, 0.05, 14},
		{"tight tolerance", 7.3, 1, 0.99, 0.01, 18},
		{"loose target", 1000, 10, 0.5, 0.1, 14},
		{"every request good", 12, 5, 1, 0.05, 14},
	}
	for _, c := range cases {
		o := DefaultSearch()
		o.Start, o.Target, o.Tolerance = c.start, c.target, c.tol
		calls := 0
		res, err := Search(context.Background(), o, probeOf(linearDrop(c.knee), &calls))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		truth := c.knee * (2 - c.target)
		if !res.Converged() || !(res.Lo <= truth) || !(res.Lo >= truth/(1+c.tol)) {
			t.Errorf("%s: stop %s, answer %v, want within %v%% below %v", c.name, res.Stop, res.Lo, c.tol*100, truth)
		}
		if !(res.Hi > truth) || res.Hi > res.Lo*(1+c.tol) {
			t.Errorf("%s: bracket [%v, %v] does not hold %v within the tolerance", c.name, res.Lo, res.Hi, truth)
		}
		if calls != len(res.Steps) || calls > c.wantMaxProbes {
			t.Errorf("%s: %d probes (%d steps), want at most %d", c.name, calls, len(res.Steps), c.wantMaxProbes)
		}
		// The last probe confirms the answer.
		if last := res.Steps[len(res.Steps)-1]; last.Phase != PhaseConfirm || last.Load != res.Lo || !last.Pass {
			t.Errorf("%s: last step %+v, want a passing confirmation of %v", c.name, last, res.Lo)
		}
	}
}

// A probe whose client fell behind counts as failed even when every
// request met the SLO: the answer stays below the first invalid load.
func TestSearchInvalidProbeNeverPasses(t *testing.T) {
	const clientLimit = 25.0 // the client falls behind above it
	probe := func(_ context.Context, load float64, _ Phase) (Outcome, error) {
		return Outcome{Attainment: 1, Valid: load <= clientLimit}, nil
	}
	o := DefaultSearch()
	o.Start = 10
	res, err := Search(context.Background(), o, probe)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Converged() || res.Lo > clientLimit || res.Lo < clientLimit/1.05 {
		t.Errorf("answer %v (%s), want just below the client's limit %v", res.Lo, res.Stop, clientLimit)
	}
	for _, st := range res.Steps {
		if !st.Outcome.Valid && st.Pass {
			t.Errorf("invalid probe at %v passed", st.Load)
		}
	}
}

// A lucky pass near the boundary is caught by its confirmation: the search
// goes on below it and still converges on the true answer.
func TestSearchConfirmationCatchesALuckyPass(t *testing.T) {
	truth := 40 * (2 - 0.95)
	f := linearDrop(40)
	seen := map[float64]int{}
	var lucky float64
	probe := func(_ context.Context, load float64, _ Phase) (Outcome, error) {
		seen[load]++
		// The first bisection probe above the truth passes once by luck.
		if load > truth && load < truth*1.3 && lucky == 0 {
			lucky = load
			return Outcome{Attainment: 1, Valid: true}, nil
		}
		return Outcome{Attainment: f(load), Valid: true}, nil
	}
	o := DefaultSearch()
	o.Start = 10
	res, err := Search(context.Background(), o, probe)
	if err != nil {
		t.Fatal(err)
	}
	if lucky == 0 || seen[lucky] < 2 {
		t.Fatalf("the lucky load %v was probed %d times, want a repeat", lucky, seen[lucky])
	}
	if !res.Converged() || res.Lo > truth || res.Lo < truth/1.05 || res.Hi > lucky {
		t.Errorf("answer %v in [%v, %v] (%s), want within 5%% below %v and the lucky %v as an upper bound",
			res.Lo, res.Lo, res.Hi, res.Stop, truth, lucky)
	}
}

func TestSearchEnds(t *testing.T) {
	always := func(a float64) ProbeFunc {
		return func(context.Context, float64, Phase) (Outcome, error) {
			return Outcome{Attainment: a, Valid: true}, nil
		}
	}
	// Nothing passes: stepping down ends at the least load.
	o := DefaultSearch()
	o.Start = 64
	res, err := Search(context.Background(), o, always(0.5))
	if err != nil || res.Stop != StopMinLoad || res.Lo != 0 || res.Hi != 64.0/1024 {
		t.Errorf("nothing passes: stop %s lo %v hi %v err %v, want min_load, lo 0, hi Start/1024", res.Stop, res.Lo, res.Hi, err)
	}
	// Everything passes: stepping up ends at --max-rate, probed exactly.
	o.MaxLoad = 100
	res, err = Search(context.Background(), o, always(1))
	if err != nil || res.Stop != StopMaxLoad || res.Lo != 100 || res.Hi != 0 {
		t.Errorf("everything passes: stop %s lo %v hi %v err %v, want max_load at 100", res.Stop, res.Lo, res.Hi, err)
	}
	// Out of probes: the bracket so far is kept.
	o = DefaultSearch()
	o.Start, o.MaxProbes = 10, 3
	calls := 0
	res, err = Search(context.Background(), o, probeOf(linearDrop(40), &calls))
	if err != nil || res.Stop != StopMaxProbes || calls != 3 || res.Lo != 40 || res.Hi != 0 {
		t.Errorf("max probes: stop %s after %d calls, bracket [%v, %v], want max_probes after 3 at [40, none]", res.Stop, calls, res.Lo, res.Hi)
	}
	// A probe that cannot run ends the search with its error and the steps so far.
	o.MaxProbes = 20
	boom := errors.New("server died")
	n := 0
	res, err = Search(context.Background(), o, func(context.Context, float64, Phase) (Outcome, error) {
		if n++; n == 3 {
			return Outcome{}, boom
		}
		return Outcome{Attainment: 1, Valid: true}, nil
	})
	if !errors.Is(err, boom) || res == nil || res.Stop != StopError || len(res.Steps) != 2 {
		t.Errorf("probe error: err %v, result %+v", err, res)
	}
}

func TestSearchOptionsValidate(t *testing.T) {
	cases := map[string]func(*SearchOptions){
		"--goodput":    func(o *SearchOptions) { o.Target = 1.5 },
		"--tolerance":  func(o *SearchOptions) { o.Tolerance = 0 },
		"--start-rate": func(o *SearchOptions) { o.Start = -1 },
		"factor":       func(o *SearchOptions) { o.Factor = 1 },
		"--confirm":    func(o *SearchOptions) { o.Confirm = -1 },
		"--max-probes": func(o *SearchOptions) { o.MaxProbes = 0 },
		"--max-rate":   func(o *SearchOptions) { o.MaxLoad = math.NaN() },
	}
	for flag, breakIt := range cases {
		o := DefaultSearch()
		o.Start = 1
		breakIt(&o)
		_, err := Search(context.Background(), o, nil)
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("%s: err %v, want one naming it", flag, err)
		}
	}
	o := DefaultSearch()
	o.Start = 1
	if err := o.Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}
