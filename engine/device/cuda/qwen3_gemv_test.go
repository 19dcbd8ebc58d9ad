package cuda

import (
	"slices"
	"testing"
)

// TestInterleaveHalves: a stacked gate|up weight of 3 rows each, 2
// columns, comes out as (gate j, up j) row pairs.
func TestInterleaveHalves(t *testing.T) {
	gateUp := []float32{
		1, 2, 3, 4, 5, 6, // gate rows 0-2
		7, 8, 9, 10, 11, 12, // up rows 0-2
	}
	want := []float32{1, 2, 7, 8, 3, 4, 9, 10, 5, 6, 11, 12}
	if got := interleaveHalves(gateUp, 2); !slices.Equal(got, want) {
		t.Fatalf("interleaveHalves = %v, want %v", got, want)
	}
}

// TestQ3GemvKernelNames: the names initRotary looks up are q3_gemv.cu's.
func TestQ3GemvKernelNames(t *testing.T) {
	want := []string{"q3_gemv_r8_n1", "q3_gemv_r8_n2", "q3_gemv_r16_n1", "q3_gemv_r16_n2",
		"q3_gemv_rms_r8_n1", "q3_gemv_rms_r8_n2", "q3_gemv_rms_r16_n1", "q3_gemv_rms_r16_n2"}
	if got := q3GemvKernelNames(); !slices.Equal(got, want) {
		t.Fatalf("q3GemvKernelNames = %v, want %v", got, want)
	}
}
