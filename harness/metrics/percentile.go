// Package metrics holds the one definition of every figure the harness
// reports (docs/METRICS.md): per-request TTFT, TPOT, per-token
// ITL, inter-chunk latency, E2E and send lag; per-scale summaries with
// NumPy-linear percentiles, throughput, goodput, errors by kind, the replay
// validity rule and the server-timing split; the spread across repeat
// rounds; offline throughput. Each function's doc comment quotes its
// definition. Tables, JSON and plots only format what is computed here.
//
// It reads results.Request records and fills results types; it imports
// nothing from engine/ or the rest of harness/.
package metrics

import (
	"math"
	"slices"

	"github.com/roseinfer/roseinfer/results"
)

// Percentile is NumPy's default ("linear") percentile, docs/METRICS.md:
// "sorted x_0..x_{n−1}, rank r = p/100 × (n − 1),
// value = x_⌊r⌋ + (r − ⌊r⌋)(x_⌈r⌉ − x_⌊r⌋). Empty set → null."
// ok is false for an empty set or p outside [0, 100]. samples is not
// modified.
func Percentile(samples []float64, p float64) (value float64, ok bool) {
	if len(samples) == 0 || !(p >= 0 && p <= 100) {
		return 0, false
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	return percentileSorted(sorted, p), true
}

// percentileSorted follows numpy.lib._function_base_impl._quantile for the
// linear method operation by operation, so results agree to the last bit:
// q = p/100, virtual index (n−1)·q, and numpy's _lerp, which interpolates
// from the upper neighbour when the fraction is ≥ 0.5.
func percentileSorted(x []float64, p float64) float64 {
	n := len(x)
	vi := float64(n-1) * (p / 100)
	if vi >= float64(n-1) {
		return x[n-1]
	}
	if vi <= 0 {
		return x[0]
	}
	lower := math.Floor(vi)
	gamma := vi - lower
	a, b := x[int(lower)], x[int(lower)+1]
	diff := b - a
	// The float64 conversions forbid fused multiply-add, which numpy does
	// not use and Go may emit on some architectures.
	if gamma >= 0.5 {
		return b - float64(diff*(1-gamma))
	}
	return a + float64(diff*gamma)
}

// Summarize is the five-number summary of one metric, docs/METRICS.md:
// "statistics: mean, p50, p90, p99, max ... Empty set → null."
// Samples are in the unit the caller wants reported (ms in summaries). NaN
// samples are dropped so a summary never carries NaN into JSON.
func Summarize(samples []float64) results.Stats {
	sorted := make([]float64, 0, len(samples))
	for _, v := range samples {
		if !math.IsNaN(v) {
			sorted = append(sorted, v)
		}
	}
	if len(sorted) == 0 {
		return results.Stats{}
	}
	mu := mean(sorted) // before sorting: NumPy sums in the samples' order
	slices.Sort(sorted)
	return results.Stats{
		Mean: ptr(mu),
		P50:  ptr(percentileSorted(sorted, 50)),
		P90:  ptr(percentileSorted(sorted, 90)),
		P99:  ptr(percentileSorted(sorted, 99)),
		Max:  ptr(sorted[len(sorted)-1]),
		N:    len(sorted),
	}
}

// mean sums as numpy.mean does, so long sample sets lose no more precision
// than the original's figures: NumPy's reduction walks the array in buffers
// of 8192 elements, adding each buffer's pairwise sum (8 accumulators,
// 128-element leaves) to a running total. On the committed fixtures this
// matches NumPy to the bit or within one ulp.
func mean(x []float64) float64 {
	const numpyBufferSize = 8192
	total := 0.0
	for i := 0; i < len(x); i += numpyBufferSize {
		total += pairwiseSum(x[i:min(i+numpyBufferSize, len(x))])
	}
	return total / float64(len(x))
}

func pairwiseSum(x []float64) float64 {
	const block = 128
	n := len(x)
	switch {
	case n < 8:
		s := 0.0
		for _, v := range x {
			s += v
		}
		return s
	case n <= block:
		var r [8]float64
		copy(r[:], x[:8])
		i := 8
		for ; i+8 <= n; i += 8 {
			for j := range r {
				r[j] += x[i+j]
			}
		}
		s := ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
		for ; i < n; i++ {
			s += x[i]
		}
		return s
	}
	half := n / 2
	half -= half % 8
	return pairwiseSum(x[:half]) + pairwiseSum(x[half:])
}

func ptr(v float64) *float64 { return &v }
