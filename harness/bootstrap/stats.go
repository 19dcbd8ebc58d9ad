package bootstrap

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Stat is one statistic of pooled samples: a NumPy-linear percentile (in
// percent) or the mean.
type Stat struct {
	Mean    bool
	Percent float64 // when !Mean, in [0, 100]
}

// Percentile is the statistic p (in percent).
func Percentile(p float64) Stat { return Stat{Percent: p} }

// Mean is the mean.
func Mean() Stat { return Stat{Mean: true} }

// pooled is a Group of statistics over every sample of a side, each sample
// weighing what its unit weighs. Eval only reads it, so the goroutines of
// Ratios share one.
type pooled struct {
	stats  []Stat
	order  []int        // indices of the percentiles in stats, ascending (the walk only moves forward)
	values [2][]float64 // per side, sorted ascending
	owner  [2][]int32   // per side, the flat unit index of each value
}

// Pooled is a Group of stats over samples[A] and samples[B], pooled per
// side (a request's TTFT is one sample, its ITLs are several of the same
// unit). Each stat is computed from all samples of a side counted by their
// unit's weight; with every weight 1 a percentile equals NumPy's (and
// harness/metrics') over the pooled samples.
func (l *Layout) Pooled(samples [2][]Sample, stats ...Stat) (Group, error) {
	g := &pooled{stats: slices.Clone(stats)}
	for i, s := range stats {
		if !s.Mean && !(s.Percent >= 0 && s.Percent <= 100) {
			return nil, fmt.Errorf("bootstrap: percentile %v outside [0, 100]", s.Percent)
		}
		if !s.Mean {
			g.order = append(g.order, i)
		}
	}
	slices.SortStableFunc(g.order, func(x, y int) int { return cmp.Compare(stats[x].Percent, stats[y].Percent) })
	for side := range 2 {
		sorted := slices.Clone(samples[side])
		slices.SortFunc(sorted, func(x, y Sample) int { return cmp.Compare(x.Value, y.Value) })
		g.values[side] = make([]float64, len(sorted))
		g.owner[side] = make([]int32, len(sorted))
		for i, s := range sorted {
			f, err := l.flat(s)
			if err != nil {
				return nil, err
			}
			g.values[side][i], g.owner[side][i] = s.Value, f
		}
	}
	return g, nil
}

func (g *pooled) Len() int { return len(g.stats) }

func (g *pooled) Eval(side int, w *Weights, out []float64) {
	values, owner := g.values[side], g.owner[side]
	var total int64
	sum := 0.0
	for i, v := range values {
		n := w.Unit[owner[i]]
		total += int64(n)
		sum += float64(n) * v
	}
	for i, s := range g.stats {
		out[i] = math.NaN()
		if s.Mean && total > 0 {
			out[i] = sum / float64(total)
		}
	}
	if total == 0 {
		return
	}
	walk := sortedWalk{values: values, owner: owner, w: w.Unit, i: -1}
	for _, i := range g.order {
		// NumPy's linear rule on the expanded sample: rank (N−1)·p/100
		// between the values at positions ⌊rank⌋ and ⌊rank⌋+1.
		vi := float64(total-1) * (g.stats[i].Percent / 100)
		lower := math.Floor(vi)
		k := int64(lower)
		if k >= total-1 {
			out[i] = walk.at(total - 1)
			continue
		}
		a := walk.at(k)
		out[i] = lerp(a, walk.at(k+1), vi-lower)
	}
}

// sortedWalk reads the sorted values as if each were repeated as many
// times as its unit weighs, at positions asked in non-decreasing order.
type sortedWalk struct {
	values []float64
	owner  []int32
	w      []int32
	i      int   // current value
	end    int64 // positions before end are covered by values[..i]
}

func (s *sortedWalk) at(pos int64) float64 {
	for s.end <= pos {
		s.i++
		s.end += int64(s.w[s.owner[s.i]])
	}
	return s.values[s.i]
}

// Event is one unit's contribution to a rate: its value (output tokens, or
// 1 for a request) and the time it occupied (sent at Start, ended at End) in
// its round, one of its block's rounds (numbered by the caller), whose clock
// starts at 0.
type Event struct {
	Block, Unit int
	Round       int
	Value       float64
	Start, End  float64
}

// rateOverSpan is a Group of one statistic: Σ weight·value over the events
// drawn / Σ over blocks drawn of the spans of their rounds, a round's span
// being its latest end − earliest start among its events drawn, per side.
type rateOverSpan struct {
	rounds [2][][][]spanEvent // per side, per block, per round
}

type spanEvent struct {
	unit       int32 // flat
	value      float64
	start, end float64
}

// RateOverSpan is a Group of one statistic per side: the events' values
// summed over the units drawn, divided by the spans of the rounds of the
// blocks drawn, each span measured over that round's events drawn. With
// output tokens as values that is the output token rate as harness/metrics
// defines it over rounds (tokens over the sum of the rounds' durations, a
// duration being the latest end minus the earliest send), computed on the
// requests drawn: a resample that leaves out the last request to finish
// has a shorter round, as a round without it would have had. A round none
// of whose events was drawn adds nothing to either sum.
func (l *Layout) RateOverSpan(events [2][]Event) (Group, error) {
	g := &rateOverSpan{}
	for side := range 2 {
		g.rounds[side] = make([][][]spanEvent, len(l.units))
		index := map[[2]int]int{} // (block, round) → index in g.rounds[side][block]
		for _, e := range events[side] {
			f, err := l.flat(Sample{Block: e.Block, Unit: e.Unit, Value: e.Value})
			if err != nil {
				return nil, err
			}
			if math.IsNaN(e.Start) || math.IsInf(e.Start, 0) || math.IsNaN(e.End) || math.IsInf(e.End, 0) || e.End < e.Start {
				return nil, fmt.Errorf("bootstrap: event of block %d unit %d spans [%v, %v]", e.Block, e.Unit, e.Start, e.End)
			}
			key := [2]int{e.Block, e.Round}
			r, ok := index[key]
			if !ok {
				r = len(g.rounds[side][e.Block])
				index[key] = r
				g.rounds[side][e.Block] = append(g.rounds[side][e.Block], nil)
			}
			g.rounds[side][e.Block][r] = append(g.rounds[side][e.Block][r], spanEvent{unit: f, value: e.Value, start: e.Start, end: e.End})
		}
	}
	return g, nil
}

func (g *rateOverSpan) Len() int { return 1 }

func (g *rateOverSpan) Eval(side int, w *Weights, out []float64) {
	num, den := 0.0, 0.0
	for b, rounds := range g.rounds[side] {
		if w.Block[b] == 0 {
			continue
		}
		for _, events := range rounds {
			first, last, any := math.Inf(1), math.Inf(-1), false
			for _, e := range events {
				if n := w.Unit[e.unit]; n > 0 {
					num += float64(n) * e.value
					first, last, any = math.Min(first, e.start), math.Max(last, e.end), true
				}
			}
			if any {
				den += float64(w.Block[b]) * (last - first)
			}
		}
	}
	out[0] = math.NaN()
	if den > 0 {
		out[0] = num / den
	}
}
