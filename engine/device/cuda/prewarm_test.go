package cuda

import (
	"slices"
	"testing"
)

// TestGemmRows checks the GEMM row buckets (no GPU needed): never fewer rows
// than asked, never more than the buffers hold, a bucket maps to itself (so
// prewarm's shapes are the serving path's), bounded padding, and few buckets.
func TestGemmRows(t *testing.T) {
	for _, limit := range []int{1, 16, 64, 100, 128, 256, 2048, 2304, 8192, 16384} {
		buckets := map[int]bool{}
		for n := 1; n <= limit; n++ {
			b := gemmRows(n, limit)
			if b < n || b > limit {
				t.Fatalf("gemmRows(%d, %d) = %d, want in [%d, %d]", n, limit, b, n, limit)
			}
			if again := gemmRows(b, limit); again != b {
				t.Fatalf("gemmRows(%d, %d) = %d but gemmRows(%d) = %d: a bucket must map to itself", n, limit, b, b, again)
			}
			// Padding: at most 16 rows or a quarter of n, whichever is more.
			if b-n > max(16, n/4) {
				t.Errorf("gemmRows(%d, %d) = %d pads too much", n, limit, b)
			}
			buckets[b] = true
		}
		all := gemmBuckets(limit, func(int) bool { return true })
		if len(all) != len(buckets) {
			t.Errorf("limit %d: gemmBuckets lists %d buckets, gemmRows uses %d", limit, len(all), len(buckets))
		}
		for _, b := range all {
			if !buckets[b] {
				t.Errorf("limit %d: gemmBuckets lists %d, which gemmRows never returns", limit, b)
			}
		}
		if want := 26 + 12 + 28 + 1; len(all) > want {
			t.Errorf("limit %d: %d buckets, want at most %d", limit, len(all), want)
		}
	}
	// Only rows that reach cuBLASLt are listed.
	if got := gemmBuckets(64, func(n int) bool { return n > 16 }); !slices.Equal(got, []int{24, 32, 48, 64}) {
		t.Errorf("gemmBuckets(64, rows > 16) = %v, want [24 32 48 64]", got)
	}
}
