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

// rate is a Group of one statistic: Σ weight·num over units / Σ pair
// draws·den over round pairs, per side.
type rate struct {
	num   [2][]float64 // per side, by flat unit index
	den   [2][]float64 // per side, by pair
	units []int
}

// Rate is a Group of one statistic per side: the sum of num's samples over
// the units drawn, divided by the sum of den over the round pairs drawn —
// output tokens over round durations is the output token rate, as the
// harness's tok/s over several rounds (total tokens / total time). den[s]
// has one positive value per round pair.
func (l *Layout) Rate(num [2][]Sample, den [2][]float64) (Group, error) {
	g := &rate{units: l.units}
	for side := range 2 {
		if len(den[side]) != len(l.units) {
			return nil, fmt.Errorf("bootstrap: %d denominators for %d round pairs", len(den[side]), len(l.units))
		}
		for p, d := range den[side] {
			if !(d > 0) || math.IsInf(d, 0) {
				return nil, fmt.Errorf("bootstrap: denominator of round pair %d is %v, want a positive number", p, d)
			}
		}
		g.den[side] = slices.Clone(den[side])
		g.num[side] = make([]float64, l.total)
		for _, s := range num[side] {
			f, err := l.flat(s)
			if err != nil {
				return nil, err
			}
			g.num[side][f] += s.Value
		}
	}
	return g, nil
}

func (g *rate) Len() int { return 1 }

func (g *rate) Eval(side int, w *Weights, out []float64) {
	num, den := 0.0, 0.0
	for f, v := range g.num[side] {
		num += float64(w.Unit[f]) * v
	}
	for p, d := range g.den[side] {
		den += float64(w.Pair[p]) * d
	}
	out[0] = num / den // den > 0: at least one pair is drawn
}
