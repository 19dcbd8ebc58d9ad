// Package bootstrap puts a confidence interval on the ratio B/A of a
// statistic measured on the two sides of a paired, interleaved experiment
// (bench ab). The experiment is a list of blocks — for bench ab, an ABBA
// block: two round pairs, A's and B's rounds of the same workload run back
// to back — and each block holds units: the requests, the same trace rows on
// both sides. A unit carries samples (a request's TTFT, its per-token ITLs,
// its output tokens), and a statistic (a percentile, a mean, a rate) is
// computed over all samples of one side pooled.
//
// The interval is a paired two-level percentile bootstrap, expanded for the
// few blocks an experiment has (expandedTail): each resample draws blocks
// with replacement, then, for every block drawn, units with replacement
// inside it; both sides get the same draws, so what the two sides share (the
// machine's state during a block, the lengths of the requests drawn) cancels
// in the ratio and what differs between them remains. Resampling blocks
// captures the noise between runs that requests alone would hide;
// resampling requests captures the sampling noise of a tail percentile.
// Drawing both levels counts the within-block noise twice, so the interval
// errs wide, which is the side a regression gate should err on.
//
// A resample is a vector of integer weights, one per unit; a statistic is
// computed over the samples each counted as many times as its unit was
// drawn, from data sorted once, so no resample is materialised or sorted.
// Resamples come from a seeded generator in fixed chunks, so the intervals
// depend only on the data, the seed and the number of resamples, not on how
// many goroutines computed them.
//
// It knows nothing about requests, servers or results files; harness/ab
// turns records into samples.
package bootstrap

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"

	"github.com/roseinfer/roseinfer/harness/metrics"
)

// The two sides.
const (
	A = 0 // the baseline: ratios are B over A
	B = 1
)

// Layout is the paired design: how many units each block holds. Units
// are numbered 0..Units[p]-1 inside block p, the same numbering on both
// sides.
type Layout struct {
	units  []int
	offset []int // offset[p]: index of block p's first unit in a flat weight vector
	total  int
}

// NewLayout checks the design: at least one block, and at least one unit in
// every block.
func NewLayout(unitsPerBlock []int) (*Layout, error) {
	if len(unitsPerBlock) == 0 {
		return nil, errors.New("bootstrap: no blocks")
	}
	l := &Layout{units: slices.Clone(unitsPerBlock), offset: make([]int, len(unitsPerBlock))}
	for p, n := range unitsPerBlock {
		if n < 1 {
			return nil, fmt.Errorf("bootstrap: block %d has no units", p)
		}
		l.offset[p] = l.total
		l.total += n
	}
	return l, nil
}

// NumBlocks is the number of blocks.
func (l *Layout) NumBlocks() int { return len(l.units) }

// Weights is one resample: how many times each block was drawn, and
// how many times each unit was drawn over all draws of its block.
type Weights struct {
	Block []int32 // by block
	Unit  []int32 // flat: unit u of block p at Layout offset p + u
}

func (l *Layout) newWeights() *Weights {
	return &Weights{Block: make([]int32, len(l.units)), Unit: make([]int32, l.total)}
}

// ones sets every weight to 1: the data as measured (the point estimate).
func (w *Weights) ones() {
	for i := range w.Block {
		w.Block[i] = 1
	}
	for i := range w.Unit {
		w.Unit[i] = 1
	}
}

// draw makes w a two-level resample: NumBlocks blocks drawn with
// replacement, and for each draw of block p, Units[p] units of p drawn with
// replacement (added up when p is drawn more than once, so a block drawn
// twice gets two independent inner resamples, as the two-level bootstrap
// requires).
func (l *Layout) draw(rng *rand.Rand, w *Weights) {
	clear(w.Block)
	clear(w.Unit)
	numBlocks := len(l.units)
	for range numBlocks {
		p := rng.IntN(numBlocks)
		w.Block[p]++
		n, off := l.units[p], l.offset[p]
		for range n {
			w.Unit[off+rng.IntN(n)]++
		}
	}
}

// flat is the flat index of a sample's unit, or an error naming it.
func (l *Layout) flat(s Sample) (int32, error) {
	if s.Block < 0 || s.Block >= len(l.units) || s.Unit < 0 || s.Unit >= l.units[s.Block] {
		return 0, fmt.Errorf("bootstrap: sample of block %d unit %d is outside the layout", s.Block, s.Unit)
	}
	if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) {
		return 0, fmt.Errorf("bootstrap: sample of block %d unit %d is %v", s.Block, s.Unit, s.Value)
	}
	return int32(l.offset[s.Block] + s.Unit), nil
}

// Sample is one value of one unit of one block.
type Sample struct {
	Block, Unit int
	Value       float64
}

// A Group is a few statistics read from the same data in one pass: Eval
// writes statistic i of one side under weights w into out[i], NaN when it
// is undefined (no weight on any sample).
type Group interface {
	Len() int
	Eval(side int, w *Weights, out []float64)
}

// Options configure Ratios.
type Options struct {
	Iterations int    // resamples (default DefaultIterations)
	Seed       uint64 // the resamples depend only on it
}

// DefaultIterations is Options.Iterations' default. With 8 blocks the
// expanded interval's ends are the 0.6% and 99.4% points of the resampled
// ratios, each read from about 25 values past it.
const DefaultIterations = 4000

// Interval is the estimate of one statistic's ratio.
type Interval struct {
	A, B      float64 // the statistic on each side over all the data (NaN: undefined)
	Ratio     float64 // B / A (NaN when either is undefined or A is 0)
	Low, High float64 // 95% expanded percentile interval of the resampled ratios (NaN: undefined)
	// Undefined counts the resamples whose ratio was undefined (every
	// sample of a side weighed zero); more than a quarter of one tail's
	// mass leaves the interval undefined.
	Undefined int
}

// Contains reports whether the interval holds v (false when undefined).
func (iv Interval) Contains(v float64) bool { return iv.Low <= v && v <= iv.High }

// chunkSize is how many resamples share one generator: chunk c's generator
// is seeded with (Seed, c), whichever goroutine runs it.
const chunkSize = 64

// Ratios estimates, for every statistic of every group, B/A over all the
// data and its bootstrap interval (out[g][i] for statistic i of group g).
func Ratios(l *Layout, groups []Group, o Options) [][]Interval {
	if o.Iterations <= 0 {
		o.Iterations = DefaultIterations
	}
	out := make([][]Interval, len(groups))
	ratios := make([][][]float64, len(groups)) // [group][stat][iteration]
	ones := l.newWeights()
	ones.ones()
	for g, grp := range groups {
		a, b := make([]float64, grp.Len()), make([]float64, grp.Len())
		grp.Eval(A, ones, a)
		grp.Eval(B, ones, b)
		out[g] = make([]Interval, grp.Len())
		ratios[g] = make([][]float64, grp.Len())
		for i := range out[g] {
			out[g][i] = Interval{A: a[i], B: b[i], Ratio: ratio(a[i], b[i]), Low: math.NaN(), High: math.NaN()}
			ratios[g][i] = make([]float64, o.Iterations)
		}
	}

	numChunks := (o.Iterations + chunkSize - 1) / chunkSize
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), numChunks) {
		wg.Go(func() {
			w := l.newWeights()
			a, b := make([]float64, maxLen(groups)), make([]float64, maxLen(groups))
			for c := range next {
				rng := rand.New(rand.NewPCG(o.Seed, uint64(c)))
				for it := c * chunkSize; it < min((c+1)*chunkSize, o.Iterations); it++ {
					l.draw(rng, w)
					for g, grp := range groups {
						grp.Eval(A, w, a)
						grp.Eval(B, w, b)
						for i := range grp.Len() {
							ratios[g][i][it] = ratio(a[i], b[i])
						}
					}
				}
			}
		})
	}
	for c := range numChunks {
		next <- c
	}
	close(next)
	wg.Wait()

	tail := expandedTail(l.NumBlocks())
	for g := range groups {
		for i := range out[g] {
			out[g][i].Low, out[g][i].High, out[g][i].Undefined = percentileInterval(ratios[g][i], tail)
		}
	}
	return out
}

func maxLen(groups []Group) int {
	n := 0
	for _, g := range groups {
		n = max(n, g.Len())
	}
	return n
}

func ratio(a, b float64) float64 {
	if math.IsNaN(a) || math.IsNaN(b) || a == 0 {
		return math.NaN()
	}
	return b / a
}

// expandedTail is the tail probability of each end of the 95% interval
// from n blocks: Hesterberg's expanded percentile interval ("What
// teachers should know about the bootstrap", 2015), α'/2 =
// Φ(−√(n/(n−1))·t_{0.975,n−1}). The plain percentile interval (α/2 =
// 2.5%) is too narrow when the resampled units are few: it ignores that
// the spread between n rounds is itself estimated (the t in place of z) and
// that a resample's spread is (n−1)/n of the sample's. With 6 blocks that is
// the 0.24% and 99.76% points, with 2 blocks about the extremes. One block has
// no spread between rounds to estimate: the plain 2.5%.
func expandedTail(numBlocks int) float64 {
	if numBlocks < 2 {
		return 0.025
	}
	n := float64(numBlocks)
	z := math.Sqrt(n/(n-1)) * metrics.TCritical95(numBlocks-1)
	return 0.5 * math.Erfc(z/math.Sqrt2)
}

// percentileInterval is the [tail, 1−tail] percentile interval of the
// defined values (NumPy-linear, as every percentile of the harness).
func percentileInterval(values []float64, tail float64) (low, high float64, undefined int) {
	defined := make([]float64, 0, len(values))
	for _, v := range values {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			defined = append(defined, v)
		}
	}
	undefined = len(values) - len(defined)
	if len(defined) == 0 || float64(undefined) > tail*float64(len(values))/2 {
		return math.NaN(), math.NaN(), undefined
	}
	slices.Sort(defined)
	return lerpAt(defined, tail), lerpAt(defined, 1-tail), undefined
}

// lerpAt is NumPy's linear quantile q of sorted x.
func lerpAt(x []float64, q float64) float64 {
	vi := float64(len(x)-1) * q
	lower := math.Floor(vi)
	i := int(lower)
	if i >= len(x)-1 {
		return x[len(x)-1]
	}
	return lerp(x[i], x[i+1], vi-lower)
}

// lerp interpolates as NumPy's _lerp: from the upper neighbour when the
// fraction is ≥ 0.5. The float64 conversions forbid fused multiply-add,
// which NumPy does not use, so an unweighted quantile here agrees with
// harness/metrics.Percentile to the bit.
func lerp(a, b, gamma float64) float64 {
	diff := b - a
	if gamma >= 0.5 {
		return b - float64(diff*(1-gamma))
	}
	return a + float64(diff*gamma)
}
