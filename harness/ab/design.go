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

// design is one scale's paired rounds, ready for the bootstrap: round pairs
// grouped into ABBA blocks, each block's requests numbered as its units.
type design struct {
	layout *bootstrap.Layout
	rounds [2][][]results.Request // [side][pair]
	block  []int                  // [pair] its block
	unit   []map[int]int          // [pair] trace row → unit in its block
}

// pairsPerBlock: an ABBA block (pairs AB and BA) is the bootstrap's unit
// of draw, not a pair. A linear drift cancels over a block but not over a
// pair, and the two rounds of one side that ABBA puts next to each other (the
// BB inside a block) share any burst of load that spans them: drawing pairs
// one by one would treat those as independent and make the interval too
// narrow.
const pairsPerBlock = 2

// newDesign pairs A's and B's rounds of the same number, groups the pairs
// into blocks in round order, and numbers each block's requests by pair and
// trace row, so a row of a pair is the same unit on both sides.
func newDesign(pairs []int, rounds [2]map[int][]results.Request) (*design, error) {
	if len(pairs) == 0 {
		return nil, fmt.Errorf("no round finished on both sides")
	}
	d := &design{}
	var units []int
	for p, round := range pairs {
		b := p / pairsPerBlock
		if b == len(units) {
			units = append(units, 0)
		}
		unit := map[int]int{}
		for s := range 2 {
			reqs := rounds[s][round]
			d.rounds[s] = append(d.rounds[s], reqs)
			for i := range reqs {
				if _, ok := unit[reqs[i].Index]; !ok {
					unit[reqs[i].Index] = units[b]
					units[b]++
				}
			}
		}
		if len(unit) == 0 {
			return nil, fmt.Errorf("round %d has no requests", round)
		}
		d.block = append(d.block, b)
		d.unit = append(d.unit, unit)
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
					out[s] = append(out[s], bootstrap.Sample{Block: d.block[p], Unit: d.unit[p][r.Index], Value: v * scaleBy})
				}
			}
		}
	}
	return out
}

// events collects, per side, every successful request's value and span in
// its round.
func (d *design) events(value func(*results.Request) float64) [2][]bootstrap.Event {
	var out [2][]bootstrap.Event
	for s := range 2 {
		for p, reqs := range d.rounds[s] {
			for i := range reqs {
				if r := &reqs[i]; metrics.Succeeded(r) {
					out[s] = append(out[s], bootstrap.Event{Block: d.block[p], Unit: d.unit[p][r.Index], Round: p,
						Value: value(r), Start: r.StartS, End: r.EndS})
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
