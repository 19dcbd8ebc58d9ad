package ab

import (
	"fmt"

	"github.com/roseinfer/roseinfer/harness/bootstrap"
	"github.com/roseinfer/roseinfer/harness/metrics"
	"github.com/roseinfer/roseinfer/results"
)

// latencyFigures are the per-request figures whose statistics bench ab
// reports, each read with harness/metrics' definition (in ms).
var latencyFigures = []struct {
	name    string
	samples func(r *results.Request) []float64
}{
	{"ttft_ms", func(r *results.Request) []float64 { return one(metrics.TTFT(r)) }},
	{"tpot_ms", func(r *results.Request) []float64 { return one(metrics.TPOT(r)) }},
	{"itl_ms", metrics.ITL},
	{"e2e_ms", func(r *results.Request) []float64 { return []float64{metrics.E2E(r)} }},
}

var latencyStats = []struct {
	name string
	stat bootstrap.Stat
}{
	{"p50", bootstrap.Percentile(50)}, {"p90", bootstrap.Percentile(90)}, {"p99", bootstrap.Percentile(99)},
	{"mean", bootstrap.Mean()},
}

func one(v float64, ok bool) []float64 {
	if !ok {
		return nil
	}
	return []float64{v}
}

// design is one scale's paired rounds, ready for the bootstrap.
type design struct {
	layout *bootstrap.Layout
	rounds [2][][]results.Request // [side][pair]
	slot   []map[int]int          // [pair] trace row → unit
}

// newDesign pairs A's and B's rounds of the same number and numbers the
// requests of each pair by trace row, so a row is the same unit on both
// sides.
func newDesign(pairs []int, rounds [2]map[int][]results.Request) (*design, error) {
	if len(pairs) == 0 {
		return nil, fmt.Errorf("no round finished on both sides")
	}
	d := &design{}
	units := make([]int, len(pairs))
	for p, round := range pairs {
		slot := map[int]int{}
		for s := range 2 {
			reqs := rounds[s][round]
			d.rounds[s] = append(d.rounds[s], reqs)
			for i := range reqs {
				if _, ok := slot[reqs[i].Index]; !ok {
					slot[reqs[i].Index] = len(slot)
				}
			}
		}
		if len(slot) == 0 {
			return nil, fmt.Errorf("round %d has no requests", round)
		}
		d.slot = append(d.slot, slot)
		units[p] = len(slot)
	}
	var err error
	d.layout, err = bootstrap.NewLayout(units)
	return d, err
}

// samples collects, per side, fig's samples of every successful request.
func (d *design) samples(fig func(*results.Request) []float64, scaleBy float64) [2][]bootstrap.Sample {
	var out [2][]bootstrap.Sample
	for s := range 2 {
		for p, reqs := range d.rounds[s] {
			for i := range reqs {
				r := &reqs[i]
				if !metrics.Succeeded(r) {
					continue
				}
				for _, v := range fig(r) {
					out[s] = append(out[s], bootstrap.Sample{Pair: p, Unit: d.slot[p][r.Index], Value: v * scaleBy})
				}
			}
		}
	}
	return out
}

// events collects, per side, every successful request's value and span.
func (d *design) events(value func(*results.Request) float64) [2][]bootstrap.Event {
	var out [2][]bootstrap.Event
	for s := range 2 {
		for p, reqs := range d.rounds[s] {
			for i := range reqs {
				if r := &reqs[i]; metrics.Succeeded(r) {
					out[s] = append(out[s], bootstrap.Event{Pair: p, Unit: d.slot[p][r.Index], Value: value(r), Start: r.StartS, End: r.EndS})
				}
			}
		}
	}
	return out
}

// ratios runs the bootstrap over every figure: names[i] is the --fail-on
// name of intervals[i].
func (d *design) ratios(st Stats) (names []string, intervals []bootstrap.Interval, err error) {
	var groups []bootstrap.Group
	stats := make([]bootstrap.Stat, len(latencyStats))
	for i, s := range latencyStats {
		stats[i] = s.stat
	}
	for _, f := range latencyFigures {
		g, err := d.layout.Pooled(d.samples(f.samples, 1000), stats...)
		if err != nil {
			return nil, nil, err
		}
		groups = append(groups, g)
		for _, s := range latencyStats {
			names = append(names, f.name+"."+s.name)
		}
	}
	// tok/s and req/s as the pooled summary has them: the successes'
	// output tokens (or successes) over the sum of the rounds' durations,
	// a duration spanning the successes' first send to their last end.
	tokens := func(r *results.Request) float64 { n, _ := metrics.OutputTokens(r); return float64(n) }
	success := func(*results.Request) float64 { return 1 }
	for _, value := range []func(*results.Request) float64{tokens, success} {
		g, err := d.layout.RateOverSpan(d.events(value))
		if err != nil {
			return nil, nil, err
		}
		groups = append(groups, g)
	}
	names = append(names, "tok_per_s", "req_per_s")
	for _, ivs := range bootstrap.Ratios(d.layout, groups, bootstrap.Options{Iterations: st.Iterations, Seed: st.Seed}) {
		intervals = append(intervals, ivs...)
	}
	return names, intervals, nil
}
