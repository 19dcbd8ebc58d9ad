package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestQ3Wgmma runs q3_wg.cu's kernels against a float64 reference on the
// same bf16 operands: q|k|v-like projections (bf16 out) and gate|up with
// SwiGLU in the epilogue in one K slice, o_proj- and down_proj-like ones
// adding into an fp32 residual in one slice and split over K, at row
// counts that are and are not multiples of the 64-row tile, every tile
// width, in clusters of 1, 2 and 4. Outputs start as NaN (the residual as
// random values); what lies past a row's columns or past the last row
// must stay so.
func TestQ3Wgmma(t *testing.T) {
	g := wgTestGPU(t, q3WGFile, q3WGKernelNames())
	for _, name := range q3WGKernelNames() {
		if err := g.setMaxDynamicSmem(g.kernels[name], g.smemOptIn-q3WGStaticSmem); err != nil {
			t.Fatal(err)
		}
	}
	r := rand.New(rand.NewPCG(47, 48))
	for _, c := range []struct{ M, K, OC, mode, bn, splits, cluster int }{
		{128, 1024, 4096, wgOutBF16, 0, 0, 1}, // 0: q3WGShape's choice (Qwen3-0.6B's q|k|v)
		{100, 1024, 6144, wgSwiGLUBF16, 0, 0, 1},
		{128, 2048, 1024, gemvResidual, 0, 0, 1}, // o_proj: 4 slices
		{45, 3072, 1024, gemvResidual, 0, 0, 2},  // down_proj: 8 slices
		{17, 1024, 768, wgSwiGLUBF16, 48, 1, 4},
		{64, 768, 512, wgOutBF16, 64, 1, 2},
		{65, 512, 256, wgOutBF16, 16, 1, 4},
		{33, 640, 128, gemvResidual, 32, 1, 2}, // one slice: the prior value read and added
		{128, 1280, 384, gemvResidual, 48, 2, 1},
		{7, 192, 64, wgSwiGLUBF16, 64, 1, 1},
	} {
		bn, splits := c.bn, c.splits
		if bn == 0 {
			var ok bool
			if bn, splits, ok = q3WGShape(g.smCount, g.smemOptIn-q3WGStaticSmem, c.M, c.K, c.OC, c.mode == gemvResidual); !ok {
				t.Fatalf("q3WGShape found no launch for %+v", c)
			}
		}
		t.Run(fmt.Sprintf("M%d_K%d_OC%d_mode%d_n%d_splits%d_cluster%d", c.M, c.K, c.OC, c.mode, bn, splits, c.cluster), func(t *testing.T) {
			runQ3WGCase(t, testGPU(t), r, c.M, c.K, c.OC, c.mode, bn, splits, c.cluster)
		})
	}
}

func runQ3WGCase(t *testing.T, g *gpu, r *rand.Rand, M, K, OC, mode, bn, splits, cluster int) {
	ldx := K + 64 // rows of x further apart than K: the map's stride is honoured
	x := roundBF16(randn(r, M*ldx, 1))
	W := roundBF16(randn(r, OC*K, 1/float32(math.Sqrt(float64(K)))))
	cols := OC // output columns a row
	if mode == wgSwiGLUBF16 {
		cols = OC / 2
	}
	ldo := cols + 8
	var out devPtr
	var init []float32
	if mode == gemvResidual {
		init = randn(r, (M+1)*ldo, 1)
		out = upload(t, g, init)
	} else {
		out = devBuf(t, g, 2*(M+1)*ldo) // NaN in bf16
	}
	dx, dW := upload(t, g, toBF16(x)), upload(t, g, toBF16(W))
	xMap, wMap := testWGMaps(t, g, dx, M, K, ldx, dW, OC)
	if err := g.q3WGGemm(bn, splits, cluster, out, ldo, xMap, wMap, M, K, OC, mode); err != nil {
		t.Fatal(err)
	}
	var got []float32
	if mode == gemvResidual {
		got = download[float32](t, g, out, (M+1)*ldo)
	} else {
		for _, h := range download[uint16](t, g, out, (M+1)*ldo) {
			got = append(got, bf16ToF32(h))
		}
	}
	dot := func(m, n int) float64 {
		acc := 0.0
		for k := 0; k < K; k++ {
			acc += float64(x[m*ldx+k]) * float64(W[n*K+k])
		}
		return acc
	}
	worst := 0.0
	for m := 0; m <= M; m++ {
		for n := 0; n < ldo; n++ {
			v, i := float64(got[m*ldo+n]), m*ldo+n
			if m == M || n >= cols { // never written
				if mode == gemvResidual && v != float64(init[i]) || mode != gemvResidual && !math.IsNaN(v) {
					t.Fatalf("row %d column %d (of %d rows, %d columns) was written: %v", m, n, M, cols, v)
				}
				continue
			}
			var want, tol float64
			switch mode {
			case wgOutBF16:
				want = dot(m, n)
				tol = 1e-3 + math.Abs(want)/128 // the bf16 store: half an ulp is 2^-9 relative
			case wgSwiGLUBF16:
				gate, up := dot(m, 2*n), dot(m, 2*n+1)
				want = gate / (1 + math.Exp(-gate)) * up
				tol = 1e-3 + math.Abs(want)/128
			case gemvResidual:
				want = float64(init[i]) + dot(m, n)
				tol = 1e-4 * (1 + math.Abs(want)) // fp32 accumulation, fp32 out
			}
			if math.IsNaN(v) || math.Abs(v-want) > tol {
				t.Fatalf("row %d column %d: got %v, want %v (tolerance %.2g)", m, n, v, want, tol)
			}
			worst = max(worst, math.Abs(v-want)/(1+math.Abs(want)))
		}
	}
	t.Logf("worst error %.3g relative to 1 + |want|", worst)
}

// TestQ3WGShape checks the launch shapes q3_wg.cu's projections take on an
// H100 (132 SMs, 227 KiB of shared memory a block) for Qwen3-0.6B at 128
// and 64 rows, and where none fits (no GPU needed).
func TestQ3WGShape(t *testing.T) {
	const sms, smem = 132, 232448 - q3WGStaticSmem
	for _, c := range []struct {
		rows, K, oc int
		residual    bool
		bn, splits  int
		ok          bool
	}{
		{128, 1024, 4096, false, 32, 1, true}, // q|k|v: 64 columns need 263 KiB for 16 k tiles, 48 do not divide
		{128, 1024, 6144, false, 48, 1, true}, // gate|up: 230,400 bytes
		{128, 2048, 1024, true, 64, 4, true},  // o_proj: 2 x 16 x 4 = 128 blocks
		{128, 3072, 1024, true, 64, 4, true},  // down_proj: 12 k tiles a slice
		{64, 2048, 1024, true, 64, 8, true},   // one row tile: twice the slices
		{128, 2048, 1024, false, 0, 0, false}, // 32 k tiles in one slice
		{128, 1000, 1024, true, 0, 0, false},  // K no multiple of 64
		{128, 1024, 100, false, 0, 0, false},  // no tile divides 100 columns
	} {
		bn, splits, ok := q3WGShape(sms, smem, c.rows, c.K, c.oc, c.residual)
		if bn != c.bn || splits != c.splits || ok != c.ok {
			t.Errorf("q3WGShape(%d rows, K %d, %d columns, residual %v) = %d, %d, %v; want %d, %d, %v",
				c.rows, c.K, c.oc, c.residual, bn, splits, ok, c.bn, c.splits, c.ok)
		}
	}
}
