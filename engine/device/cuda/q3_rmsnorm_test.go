package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestQ3RMSNorm checks q3_rmsnorm and q3_rmsnorm_rows (bf16 out) and
// q3f_rmsnorm (fp32 out)
// against float64: the first rows and an index list of rows (the final
// norm's sampled rows), widths a thread holds in registers (up to 1,024
// channels) and wider ones that loop (2,560, as larger Qwen3 models have).
// Outputs start as NaN.
func TestQ3RMSNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(71, 72))
	const eps = 1e-6
	for _, tc := range []struct {
		rows, c int
		index   bool
	}{{1, 1024, false}, {13, 1024, true}, {9, 100, false}, {5, 2560, true}, {16, 256, false}, {70, 1024, false}} {
		t.Run(fmt.Sprintf("rows=%d_c=%d_index=%v", tc.rows, tc.c, tc.index), func(t *testing.T) {
			g := testGPU(t)  // binds the context on this subtest's thread
			n := tc.rows + 3 // the residual stream has more rows than are normalised
			x := make([]float32, n*tc.c)
			for k := range x {
				x[k] = float32(2 * r.NormFloat64())
			}
			w := make([]float32, tc.c)
			for k := range w {
				w[k] = float32(1 + 0.5*r.NormFloat64())
			}
			src := make([]int32, tc.rows)
			for i := range src {
				src[i] = int32(i)
				if tc.index {
					src[i] = int32(n - 1 - i)
				}
			}
			var rows devPtr
			if tc.index {
				rows = upload(t, g, src)
			}
			dx, dw := upload(t, g, x), upload(t, g, w)
			out16, out32, out16r := devBuf(t, g, 2*tc.rows*tc.c), devBuf(t, g, 4*tc.rows*tc.c), devBuf(t, g, 2*tc.rows*tc.c)
			for _, k := range []struct {
				name   string
				out    devPtr
				blocks int
			}{{"q3_rmsnorm", out16, tc.rows}, {"q3f_rmsnorm", out32, tc.rows}, {"q3_rmsnorm_rows", out16r, ceilDiv(tc.rows, rotaryNormRows)}} {
				// As rotaryStep.rmsnorm launches them: a block of 256 threads a
				// row, or a warp a row and eight rows a block.
				if err := g.launch(g.kernel(k.name), k.blocks, 1, 1, 256, 0, argPtr(k.out), argPtr(dx), argPtr(rows), argPtr(dw),
					argInt(tc.rows), argInt(tc.c), argF32(eps)); err != nil {
					t.Fatal(err)
				}
			}
			got16, got32 := download[uint16](t, g, out16, tc.rows*tc.c), download[float32](t, g, out32, tc.rows*tc.c)
			got16r := download[uint16](t, g, out16r, tc.rows*tc.c)
			for i, s := range src {
				row := x[int(s)*tc.c : (int(s)+1)*tc.c]
				var ss float64
				for _, v := range row {
					ss += float64(v) * float64(v)
				}
				inv := 1 / math.Sqrt(ss/float64(tc.c)+eps)
				for j, v := range row {
					want := float64(v) * inv * float64(w[j])
					// bf16 out: its rounding (2^-9 relative) and fp32 sums.
					if d := math.Abs(float64(bf16ToF32(got16[i*tc.c+j])) - want); !(d <= 4e-3*math.Abs(want)+1e-6) {
						t.Fatalf("bf16 row %d channel %d: %v, want %v", i, j, bf16ToF32(got16[i*tc.c+j]), want)
					}
					if d := math.Abs(float64(bf16ToF32(got16r[i*tc.c+j])) - want); !(d <= 4e-3*math.Abs(want)+1e-6) {
						t.Fatalf("q3_rmsnorm_rows row %d channel %d: %v, want %v", i, j, bf16ToF32(got16r[i*tc.c+j]), want)
					}
					if d := math.Abs(float64(got32[i*tc.c+j]) - want); !(d <= 1e-5*math.Abs(want)+1e-6) {
						t.Fatalf("fp32 row %d channel %d: %v, want %v", i, j, got32[i*tc.c+j], want)
					}
				}
			}
		})
	}
}
