package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestLMHeadKernels runs lmhead.cu's kernels over row counts across the
// 8/16-row variants, both instantiated widths, column counts that end in a
// partial tile, grids that leave warps several tiles (the ring runs from
// tile to tile) and the GPT-2 vocabulary, on selected residual rows with
// LayerNorm fused. Logits are checked against a float64 reference, with
// columns past OC left poisoned; tile keys against the largest key of the
// tile's logits as the kernel wrote them (hostTileKeys), padding keys past
// the tiles untouched.
func TestLMHeadKernels(t *testing.T) {
	testGPU(t)
	r := rand.New(rand.NewPCG(41, 42))
	for _, c := range []struct{ M, kch, OC, grid int }{
		{1, 24, 1003, 3}, {5, 24, 50304, 262}, {8, 24, 200, 1}, {9, 24, 1003, 7}, {16, 24, 4096, 262},
		{1, 32, 999, 2}, {16, 32, 2048, 64}, {3, 8, 500, 5}, {12, 8, 50304, 262},
	} {
		t.Run(fmt.Sprintf("M%d_K%d_OC%d_grid%d", c.M, 32*c.kch, c.OC, c.grid), func(t *testing.T) {
			runLMHeadCase(t, testGPU(t), r, c.M, c.kch, c.OC, c.grid)
		})
	}
}

func runLMHeadCase(t *testing.T, g *gpu, r *rand.Rand, M, kch, OC, grid int) {
	const eps = 1e-5
	K := 32 * kch
	ldo := (OC + 24 + 7) &^ 7 // padding columns that must stay poisoned; even, a whole number of tiles
	ldk := ldo / lmheadTileCols
	W := roundF16(randn(r, OC*K, 1/float32(math.Sqrt(float64(K)))))
	R := M + 7
	resid := randn(r, R*K, 2)
	lnw, lnb := randn(r, K, 1), randn(r, K, 0.1)
	sel := make([]int32, M)
	xin := make([][]float64, M)
	tmp := make([]float32, K)
	for m := range sel {
		sel[m] = int32(R - 1 - 2*m%R)
		refLayerNorm(tmp, resid[int(sel[m])*K:(int(sel[m])+1)*K], lnw, lnb, eps)
		xin[m] = make([]float64, K)
		for k, v := range roundF16(tmp) {
			xin[m][k] = float64(v)
		}
	}
	out, keys := devBuf(t, g, 4*M*ldo), devBuf(t, g, 4*M*ldk)
	if err := g.launch(g.kernel(lmheadKernelName(M > 8, kch)), grid, 1, 1, gemvThreads, 0,
		argPtr(out), argInt(ldo), argPtr(keys), argInt(ldk), argPtr(upload(t, g, resid)), argPtr(upload(t, g, sel)),
		argPtr(upload(t, g, lnw)), argPtr(upload(t, g, lnb)), argF32(eps), argPtr(upload(t, g, toF16(W))), argInt(M),
		argInt(OC)); err != nil {
		t.Fatal(err)
	}
	got := download[float32](t, g, out, M*ldo)
	checkProjection(t, got, nil, M, ldo, OC, K, gemvOut32, func(m, k int) float64 { return xin[m][k] }, W, nil, nil)
	gotKeys := download[uint32](t, g, keys, M*ldk)
	valid := make([]float32, len(got)) // the written logits, -inf past OC (outside every tile's maximum)
	for i, v := range got {
		valid[i] = v
		if i%ldo >= OC {
			valid[i] = float32(math.Inf(-1))
		}
	}
	wantKeys := hostTileKeys(valid, M, ldo)
	tiles := (OC + lmheadTileCols - 1) / lmheadTileCols
	for m := 0; m < M; m++ {
		for tile := 0; tile < ldk; tile++ {
			k := gotKeys[m*ldk+tile]
			want := wantKeys[m*ldk+tile]
			if tile >= tiles {
				want = 0xffffffff // devBuf's poison: never written
			}
			if k != want {
				t.Fatalf("row %d tile %d: key %#x, want %#x", m, tile, k, want)
			}
		}
	}
}
