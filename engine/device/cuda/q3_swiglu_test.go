package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestQ3SwiGLU checks q3_swiglu (bf16) and q3f_swiglu (fp32) against
// float64 SiLU(gate) * up over interleaved (gate, up) pairs: intermediate
// sizes that are and are not multiples of 4, and grids with fewer block
// rows than rows, which the kernels stride over. Outputs start as NaN.
func TestQ3SwiGLU(t *testing.T) {
	r := rand.New(rand.NewPCG(61, 62))
	for _, tc := range []struct{ n, i, gridY int }{{7, 3072, 0}, {5, 10, 0}, {9, 12, 4}, {3, 1030, 2}} {
		t.Run(fmt.Sprintf("rows=%d_i=%d_gridY=%d", tc.n, tc.i, tc.gridY), func(t *testing.T) {
			g := testGPU(t) // binds the context on this subtest's thread
			gu := make([]float32, tc.n*2*tc.i)
			for k := range gu {
				gu[k] = bf16ToF32(f32ToBF16(float32(3 * r.NormFloat64())))
			}
			gx, gy := q3SwiGLUGrid(tc.n, tc.i)
			if tc.gridY > 0 {
				gy = tc.gridY
			}
			want := func(row, j int) float64 {
				gv, uv := float64(gu[row*2*tc.i+2*j]), float64(gu[row*2*tc.i+2*j+1])
				return gv / (1 + math.Exp(-gv)) * uv
			}
			gub := make([]uint16, len(gu))
			for k, v := range gu {
				gub[k] = f32ToBF16(v)
			}
			out16 := devBuf(t, g, 2*tc.n*tc.i)
			if err := g.launch(g.kernel("q3_swiglu"), gx, gy, 1, 256, 0, argPtr(out16), argPtr(upload(t, g, gub)),
				argInt(tc.n), argInt(tc.i)); err != nil {
				t.Fatal(err)
			}
			out32 := devBuf(t, g, 4*tc.n*tc.i)
			if err := g.launch(g.kernel("q3f_swiglu"), gx, gy, 1, 256, 0, argPtr(out32), argPtr(upload(t, g, gu)),
				argInt(tc.n), argInt(tc.i)); err != nil {
				t.Fatal(err)
			}
			got16, got32 := download[uint16](t, g, out16, tc.n*tc.i), download[float32](t, g, out32, tc.n*tc.i)
			for row := range tc.n {
				for j := range tc.i {
					w := want(row, j)
					// bf16 out: its rounding (2^-9 relative) and __expf's error.
					if d := math.Abs(float64(bf16ToF32(got16[row*tc.i+j])) - w); !(d <= 5e-3*math.Abs(w)+1e-6) {
						t.Fatalf("bf16 row %d output %d: %v, want %v", row, j, bf16ToF32(got16[row*tc.i+j]), w)
					}
					if d := math.Abs(float64(got32[row*tc.i+j]) - w); !(d <= 1e-5*math.Abs(w)+1e-6) {
						t.Fatalf("fp32 row %d output %d: %v, want %v", row, j, got32[row*tc.i+j], w)
					}
				}
			}
		})
	}
}
