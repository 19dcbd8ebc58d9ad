package traces

import (
	"math"
	"math/rand/v2"
)

// MeanRate is the rows' mean arrival rate at scale 1, in requests per
// second: (n − 1) gaps over the span from the first to the last timestamp.
// It is 0 with fewer than two rows or when every row has the same time (no
// rate can be read from the trace). Schedule at scale s gives MeanRate / s.
func MeanRate(rows []Row) float64 {
	if len(rows) < 2 {
		return 0
	}
	first, last := math.Inf(1), math.Inf(-1)
	for _, r := range rows {
		first, last = math.Min(first, r.TimestampS), math.Max(last, r.TimestampS)
	}
	if !(last > first) {
		return 0
	}
	return float64(len(rows)-1) / (last - first)
}

// PoissonArrivals returns a copy of rows, in their order, whose timestamps
// are Poisson arrivals at 1 request per second: gaps −ln(1−U) with U drawn
// from a PCG seeded by seed, so the same seed gives the same arrivals on
// every machine. The times are then rescaled so that MeanRate is exactly 1:
// scheduled at scale 1/λ, the rows arrive at exactly λ requests per second
// on average, with exponential gaps, and the nominal rate a load search
// reports is the rate the server was offered. Lengths and hashes are kept.
func PoissonArrivals(rows []Row, seed int64) []Row {
	out := make([]Row, len(rows))
	copy(out, rows)
	if len(out) == 0 {
		return out
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))
	t := 0.0
	out[0].TimestampS = 0
	for i := 1; i < len(out); i++ {
		t += -math.Log1p(-rng.Float64()) // Float64 is in [0, 1): the gap is finite
		out[i].TimestampS = t
	}
	if t > 0 {
		k := float64(len(out)-1) / t
		for i := range out {
			out[i].TimestampS *= k
		}
	}
	return out
}
