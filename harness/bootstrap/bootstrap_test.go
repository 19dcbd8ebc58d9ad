package bootstrap

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/roseinfer/roseinfer/harness/metrics"
)

// experiment is synthetic paired data with a known B/A ratio. Unit u (a
// request) is scheduled at u·10 ms and has a base latency (its length,
// shared by both sides). Every block has a drift factor (the machine,
// shared by both sides); every round its own factor of spread roundNoise
// (what makes one round of a server slower than its next, not shared); every
// sample its own noise of spread 0.2 (not shared). B's times are A's
// distribution times ratio, so every latency statistic's true ratio is
// ratio and the rate's (tokens over the round's span) is 1/ratio.
type experiment struct {
	layout  *Layout
	samples [2][]Sample // one per unit, and a second of the same unit for half the units
	events  [2][]Event  // one per unit: its tokens and span
}

func newExperiment(t *testing.T, seed uint64, numBlocks, numUnits int, ratio, roundNoise float64) experiment {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	units := make([]int, numBlocks)
	for p := range units {
		units[p] = numUnits
	}
	l, err := NewLayout(units)
	if err != nil {
		t.Fatal(err)
	}
	e := experiment{layout: l}
	base := make([]float64, numUnits)
	for u := range base {
		base[u] = math.Exp(rng.NormFloat64() * 0.5)
	}
	for p := range numBlocks {
		drift := 1 + 0.05*rng.NormFloat64()
		for side, factor := range []float64{1, ratio} {
			round := 1 + roundNoise*rng.NormFloat64()
			for u := range numUnits {
				latency := func() float64 { return factor * drift * round * base[u] * math.Exp(0.2*rng.NormFloat64()) }
				for range 1 + u%2 {
					e.samples[side] = append(e.samples[side], Sample{Block: p, Unit: u, Value: latency()})
				}
				start := factor * float64(u) * 0.01
				e.events[side] = append(e.events[side], Event{Block: p, Unit: u, Value: float64(10 + u%7),
					Start: start, End: start + latency()/100})
			}
		}
	}
	return e
}

var testStats = []Stat{Percentile(50), Percentile(90), Percentile(99), Mean()}

func (e experiment) groups(t *testing.T) []Group {
	t.Helper()
	pooledGroup, err := e.layout.Pooled(e.samples, testStats...)
	if err != nil {
		t.Fatal(err)
	}
	rateGroup, err := e.layout.RateOverSpan(e.events)
	if err != nil {
		t.Fatal(err)
	}
	return []Group{pooledGroup, rateGroup}
}

func TestKnownRatioIsEstimatedAndFlagged(t *testing.T) {
	e := newExperiment(t, 1, 8, 60, 1.2, 0.02)
	out := Ratios(e.layout, e.groups(t), Options{Iterations: 1000, Seed: 1})
	for i, iv := range out[0] {
		// 99th percentiles of 720 samples are too noisy to tell 1.2 from
		// 1.0 reliably; the interval must still hold the truth.
		if !iv.Contains(1.2) || (iv.Contains(1.0) && testStats[i].Percent != 99) {
			t.Errorf("stat %v: ratio %.3f interval [%.3f, %.3f]: want it to hold 1.2 and not 1.0", testStats[i], iv.Ratio, iv.Low, iv.High)
		}
		if math.Abs(iv.Ratio-1.2) > 0.1 {
			t.Errorf("stat %v: ratio %.3f, want about 1.2", testStats[i], iv.Ratio)
		}
	}
	// The rate is tokens over time: 1.2 times the time is 1/1.2 the rate.
	if iv := out[1][0]; !iv.Contains(1/1.2) || iv.Contains(1.0) {
		t.Errorf("rate: ratio %.3f interval [%.3f, %.3f]: want it to hold %.3f and not 1.0", iv.Ratio, iv.Low, iv.High, 1/1.2)
	}
}

// TestCoverage runs many synthetic experiments whose true ratio is known and
// counts how often the 95% interval holds it: at least 95%, as the two
// levels of resampling count the noise within rounds twice. On this data,
// where rounds differ by more than their requests do, a bootstrap without
// the expansion held the truth in 91% of experiments (one statistic) and
// one that drew requests but not blocks in 78%.
func TestCoverage(t *testing.T) {
	const tries = 300
	for _, ratio := range []float64{1, 1.2} {
		held := make([]int, len(testStats)+1)
		for seed := range uint64(tries) {
			e := newExperiment(t, 100+seed, 6, 20, ratio, 0.08)
			out := Ratios(e.layout, e.groups(t), Options{Iterations: 300, Seed: seed})
			for i, iv := range append(out[0], out[1]...) {
				want := ratio
				if i == len(testStats) {
					want = 1 / ratio
				}
				if iv.Contains(want) {
					held[i]++
				}
			}
		}
		for i, n := range held {
			if least := tries * 95 / 100; n < least {
				t.Errorf("true ratio %v, statistic %d: interval held it in %d of %d experiments, want at least %d", ratio, i, n, tries, least)
			}
		}
		t.Logf("true ratio %v: held in %v of %d", ratio, held, tries)
	}
}

func TestDeterministic(t *testing.T) {
	e := newExperiment(t, 3, 4, 30, 1, 0.02)
	run := func(seed uint64) [][]Interval {
		return Ratios(e.layout, e.groups(t), Options{Iterations: 300, Seed: seed})
	}
	first := run(9)
	prev := runtime.GOMAXPROCS(1)
	one := run(9)
	runtime.GOMAXPROCS(prev)
	if !equalIntervals(first, one) {
		t.Errorf("one goroutine gave %v, several %v: the seed alone must decide", one, first)
	}
	if equalIntervals(first, run(10)) {
		t.Error("seeds 9 and 10 gave the same intervals")
	}
}

func equalIntervals(x, y [][]Interval) bool {
	return slices.EqualFunc(x, y, func(a, b []Interval) bool { return slices.Equal(a, b) })
}

// With every weight 1, a pooled percentile is NumPy's over the samples, as
// harness/metrics computes it, to the bit; with integer weights it is the
// percentile of the samples repeated that many times.
func TestPooledPercentilesMatchMetrics(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	l, err := NewLayout([]int{7, 5, 9})
	if err != nil {
		t.Fatal(err)
	}
	var samples []Sample
	for p, n := range l.units {
		for u := range n {
			for range 1 + rng.IntN(3) {
				samples = append(samples, Sample{Block: p, Unit: u, Value: math.Round(rng.ExpFloat64()*1000) / 100})
			}
		}
	}
	stats := []Stat{Percentile(99), Percentile(0), Percentile(50), Mean(), Percentile(90), Percentile(100), Percentile(37.5)}
	g, err := l.Pooled([2][]Sample{samples, samples}, stats...)
	if err != nil {
		t.Fatal(err)
	}
	w := l.newWeights()
	for trial := range 20 {
		if trial == 0 {
			w.ones()
		} else {
			l.draw(rng, w)
		}
		var expanded []float64
		for _, s := range samples {
			f, _ := l.flat(s)
			for range w.Unit[f] {
				expanded = append(expanded, s.Value)
			}
		}
		got := make([]float64, len(stats))
		g.Eval(A, w, got)
		for i, s := range stats {
			var want float64
			if s.Mean {
				want = sum(expanded) / float64(len(expanded))
				if math.Abs(got[i]-want) > 1e-9*want {
					t.Errorf("trial %d mean: got %v want %v", trial, got[i], want)
				}
				continue
			}
			want, _ = metrics.Percentile(expanded, s.Percent)
			if got[i] != want {
				t.Errorf("trial %d p%v: got %v want %v", trial, s.Percent, got[i], want)
			}
		}
	}
}

func sum(x []float64) float64 {
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s
}

func TestUndefinedRatios(t *testing.T) {
	l, err := NewLayout([]int{3, 3})
	if err != nil {
		t.Fatal(err)
	}
	a := []Sample{{0, 0, 1}, {0, 1, 2}, {1, 2, 3}}
	// B has no samples at all (every request failed): nothing to compare.
	g, err := l.Pooled([2][]Sample{a, nil}, Percentile(50), Mean())
	if err != nil {
		t.Fatal(err)
	}
	// A is zero: no ratio.
	zero, err := l.Pooled([2][]Sample{{{0, 0, 0}, {1, 0, 0}}, a}, Percentile(50))
	if err != nil {
		t.Fatal(err)
	}
	out := Ratios(l, []Group{g, zero}, Options{Iterations: 100, Seed: 1})
	for _, ivs := range out {
		for _, iv := range ivs {
			if !math.IsNaN(iv.Ratio) || !math.IsNaN(iv.Low) || !math.IsNaN(iv.High) || iv.Contains(1) {
				t.Errorf("got %+v, want an undefined ratio and interval", iv)
			}
		}
	}
	// A sample in only one unit of one block: most resamples leave it
	// out, so the interval is undefined though the point estimate is not.
	rare, err := l.Pooled([2][]Sample{a, {{0, 0, 5}}}, Percentile(50))
	if err != nil {
		t.Fatal(err)
	}
	iv := Ratios(l, []Group{rare}, Options{Iterations: 200, Seed: 1})[0][0]
	if iv.Ratio != 2.5 || !math.IsNaN(iv.Low) || iv.Undefined == 0 {
		t.Errorf("got %+v, want ratio 2.5 with an undefined interval", iv)
	}
}

func TestBadInput(t *testing.T) {
	if _, err := NewLayout(nil); err == nil {
		t.Error("NewLayout(nil): want an error")
	}
	if _, err := NewLayout([]int{3, 0}); err == nil {
		t.Error("a block without units: want an error")
	}
	l, err := NewLayout([]int{2, 2})
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]Sample{
		"block out of range": {Block: 2, Unit: 0, Value: 1},
		"unit out of range":  {Block: 0, Unit: 2, Value: 1},
		"negative unit":      {Block: 0, Unit: -1, Value: 1},
		"NaN":                {Block: 0, Unit: 0, Value: math.NaN()},
		"Inf":                {Block: 0, Unit: 0, Value: math.Inf(1)},
	} {
		if _, err := l.Pooled([2][]Sample{{s}, nil}, Mean()); err == nil {
			t.Errorf("Pooled with %s: want an error", name)
		}
		if _, err := l.RateOverSpan([2][]Event{nil, {{Block: s.Block, Unit: s.Unit, Value: s.Value, End: 1}}}); err == nil {
			t.Errorf("RateOverSpan with %s: want an error", name)
		}
	}
	if _, err := l.Pooled([2][]Sample{}, Percentile(101)); err == nil {
		t.Error("percentile 101: want an error")
	}
	for name, e := range map[string]Event{
		"ends before it starts": {Start: 2, End: 1},
		"NaN start":             {Start: math.NaN(), End: 1},
		"infinite end":          {End: math.Inf(1)},
	} {
		if _, err := l.RateOverSpan([2][]Event{{e}, nil}); err == nil {
			t.Errorf("an event that %s: want an error", name)
		}
	}
}

// A block's rounds each have their own clock: a rate divides by the sum of
// their spans, never by one span across both.
func TestRateSpansEachRound(t *testing.T) {
	l, err := NewLayout([]int{3})
	if err != nil {
		t.Fatal(err)
	}
	events := func(stretch float64) []Event {
		return []Event{
			{Unit: 0, Round: 0, Value: 10, Start: 0, End: 1 * stretch},
			{Unit: 1, Round: 0, Value: 10, Start: 0.5, End: 2 * stretch},
			{Unit: 2, Round: 1, Value: 10, Start: 0, End: 3 * stretch},
		}
	}
	g, err := l.RateOverSpan([2][]Event{events(1), events(2)})
	if err != nil {
		t.Fatal(err)
	}
	iv := Ratios(l, []Group{g}, Options{Iterations: 100})[0][0]
	// A: 30 tokens over spans 2 + 3 s; B: over 4 + 6 s.
	if iv.A != 6 || iv.B != 3 || iv.Ratio != 0.5 {
		t.Errorf("rates %v and %v, ratio %v; want 6, 3 and 0.5", iv.A, iv.B, iv.Ratio)
	}
}
