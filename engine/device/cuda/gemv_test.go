package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestGemvKernels runs every gemv.cu kernel over random shapes (row counts
// across the 8/16-row variants, column counts that leave partial tiles,
// grids smaller than the tile count so blocks loop) in each epilogue, and
// compares with a float64 reference. Outputs start poisoned (or, for the
// residual epilogue, random), and the padding columns past OC must stay
// untouched.
func TestGemvKernels(t *testing.T) {
	testGPU(t)
	r := rand.New(rand.NewPCG(31, 32))
	type tcase struct {
		ln           bool
		M, K, OC     int
		mode, grid   int
		rows16, two  bool
		selectedRows bool
	}
	var cases []tcase
	for _, ln := range []bool{true, false} {
		for _, rows16 := range []bool{false, true} {
			for _, two := range []bool{false, true} {
				Ms := []int{1, 5, 8}
				if rows16 {
					Ms = []int{9, 16}
				}
				for i, M := range Ms {
					c := tcase{ln: ln, M: M, rows16: rows16, two: two, grid: []int{3, 200}[i%2]}
					if ln {
						c.K, c.OC, c.mode, c.selectedRows = []int{256, 768}[i%2], []int{100, 2304}[i%2], []int{gemvOut16Bias, gemvOut16BiasGelu, gemvOut32}[i%3], i%2 == 0
					} else {
						c.K, c.OC, c.mode = []int{3072, 768}[i%2], []int{768, 40}[i%2], []int{gemvResidual, gemvOut16Bias}[i%2]
					}
					cases = append(cases, c)
				}
			}
		}
	}
	for _, c := range cases {
		name := fmt.Sprintf("%s_M%d_K%d_OC%d_mode%d_grid%d_sel%v", gemvKernelName(c.ln, c.rows16, c.two), c.M, c.K, c.OC, c.mode, c.grid, c.selectedRows)
		t.Run(name, func(t *testing.T) {
			g := testGPU(t)
			runGemvCase(t, g, r, gemvKernelName(c.ln, c.rows16, c.two), c.ln, c.M, c.K, c.OC, c.mode, c.grid, c.selectedRows)
		})
	}
}

func runGemvCase(t *testing.T, g *gpu, r *rand.Rand, kname string, ln bool, M, K, OC, mode, grid int, selectedRows bool) {
	const eps = 1e-5
	ldo := OC + 24 // padding columns that must stay poisoned
	W := roundF16(randn(r, OC*K, 1/float32(math.Sqrt(float64(K)))))
	bias := randn(r, OC, 0.5)
	bias16 := roundF16(bias)
	fp32Out := mode == gemvResidual || mode == gemvOut32
	// Inputs as the reference sees them (after the kernel's own fp16 rounding).
	xin := make([][]float64, M)
	var args []uint64
	elem := 2
	if fp32Out {
		elem = 4
	}
	out := devBuf(t, g, elem*M*ldo)
	init := make([]float32, M*ldo)
	if mode == gemvResidual {
		copy(init, randn(r, M*ldo, 1))
		out = upload(t, g, init)
	}
	if ln {
		R := M + 7
		resid := randn(r, R*K, 2)
		for i := range resid {
			resid[i] += 0.3
		}
		lnw, lnb := randn(r, K, 1), randn(r, K, 0.1)
		sel := make([]int32, M)
		for i := range sel {
			sel[i] = int32(i)
			if selectedRows {
				sel[i] = int32(R - 1 - 2*i%R)
			}
		}
		tmp := make([]float32, K)
		for m := 0; m < M; m++ {
			refLayerNorm(tmp, resid[int(sel[m])*K:(int(sel[m])+1)*K], lnw, lnb, eps)
			xin[m] = make([]float64, K)
			for k, v := range roundF16(tmp) {
				xin[m][k] = float64(v)
			}
		}
		selPtr := devPtr(0)
		if selectedRows {
			selPtr = upload(t, g, sel)
		}
		args = []uint64{argPtr(out), argInt(ldo), argPtr(upload(t, g, resid)), argPtr(selPtr), argPtr(upload(t, g, lnw)),
			argPtr(upload(t, g, lnb)), argF32(eps), argPtr(upload(t, g, toF16(W))), argPtr(upload(t, g, toF16(bias16))),
			argPtr(upload(t, g, bias)), argInt(M), argInt(K), argInt(OC), argInt(mode)}
	} else {
		ldx := K + 8
		x := roundF16(randn(r, M*ldx, 1))
		for m := 0; m < M; m++ {
			xin[m] = make([]float64, K)
			for k := 0; k < K; k++ {
				xin[m][k] = float64(x[m*ldx+k])
			}
		}
		args = []uint64{argPtr(out), argInt(ldo), argPtr(upload(t, g, toF16(x))), argInt(ldx), argPtr(upload(t, g, toF16(W))),
			argPtr(upload(t, g, toF16(bias16))), argPtr(upload(t, g, bias)), argInt(M), argInt(K), argInt(OC), argInt(mode)}
	}
	if err := g.launch(g.kernel(kname), grid, 1, 1, gemvThreads, 0, args...); err != nil {
		t.Fatal(err)
	}
	got := downloadOutput(t, g, out, M*ldo, fp32Out)
	checkProjection(t, got, init, M, ldo, OC, K, mode, func(m, k int) float64 { return xin[m][k] }, W, bias16, bias)
}

// TestSkinnyGemm runs gemm_skinny over row counts around its 16-row MMA
// tiles and 32/64-row block tiles, both block heights, shapes with partial
// column and row tiles, one split and several (a cluster whose blocks sum
// each other's partial tiles, also with splits of uneven length), the
// model's own shapes (skinnyShapeFor), in each epilogue, against a float64
// reference; outputs start poisoned (random for the residual epilogue) and
// columns past OC must stay untouched. It needs thread-block clusters
// (compute capability 9+).
func TestSkinnyGemm(t *testing.T) {
	g := testGPU(t)
	if g.ccMajor < 9 {
		t.Skipf("%s has no thread-block clusters", g.arch)
	}
	r := rand.New(rand.NewPCG(41, 42))
	for i, c := range []struct{ M, K, OC, mode, bm, splits int }{
		{17, 768, 2304, gemvOut16Bias, 32, 4},
		{128, 768, 3072, gemvOut16BiasGelu, 64, 2},
		{64, 3072, 768, gemvResidual, 64, 5},
		{64, 3072, 768, gemvResidual, 64, 1}, // 48 k tiles: the pipeline's slots are reused
		{65, 768, 768, gemvResidual, 32, 2},
		{100, 256, 100, gemvOut32, 64, 2},
		{40, 256, 40, gemvOut16Bias, 32, 4},
		{33, 320, 99, gemvResidual, 64, 2}, // uneven splits: 2 and 3 k tiles
		{20, 576, 99, gemvOut16BiasGelu, 32, 7},
		{128, 768, 2304, gemvOut16Bias, 0, 0}, // 0: the shape the device picks
		{128, 768, 768, gemvResidual, 0, 0},
		{97, 3072, 768, gemvResidual, 0, 0},
		{24, 768, 3072, gemvOut16BiasGelu, 0, 0},
	} {
		t.Run(fmt.Sprintf("M%d_K%d_OC%d_mode%d_bm%d_split%d", c.M, c.K, c.OC, c.mode, c.bm, c.splits), func(t *testing.T) {
			g := testGPU(t) // binds the context on this subtest's thread
			sh := skinnyShapeFor(g.smCount, c.M, c.OC, c.K, nil)
			if c.bm != 0 {
				sh = skinnyShape{k: skinnyKernelFor(c.bm), splits: c.splits}
			}
			runSkinnyCase(t, g, r, c.M, c.K, c.OC, c.mode, sh, i%2 == 0)
		})
	}
	// The variants (k groups, shallower pipelines, L2 prefetch of the
	// tiles that do not fit) over the model's shapes at 128 and 33 rows and
	// with explicit splits.
	for _, v := range skinnyKernels[2:] {
		for i, c := range []struct{ M, K, OC, mode, splits int }{
			{128, 768, 2304, gemvOut16Bias, 0},
			{128, 768, 3072, gemvOut16BiasGelu, 0},
			{128, 768, 768, gemvResidual, 0},
			{128, 3072, 768, gemvResidual, 0},
			{33, 3072, 768, gemvResidual, 1}, // 48 k tiles through a shallow pipeline
			{24, 768, 2304, gemvOut16Bias, 0},
			{32, 3072, 768, gemvResidual, 0},
			{97, 320, 99, gemvOut32, 2}, // uneven splits
		} {
			t.Run(fmt.Sprintf("%s_M%d_K%d_OC%d_mode%d", v.name, c.M, c.K, c.OC, c.mode), func(t *testing.T) {
				g := testGPU(t)
				v := v
				sh := skinnyShapeFor(g.smCount, c.M, c.OC, c.K, &v)
				if c.splits != 0 {
					sh.splits = c.splits
				}
				runSkinnyCase(t, g, r, c.M, c.K, c.OC, c.mode, sh, i%2 == 0)
			})
		}
	}
}

func runSkinnyCase(t *testing.T, g *gpu, r *rand.Rand, M, K, OC, mode int, sh skinnyShape, twice bool) {
	c := newProjCase(t, g, r, M, K, OC, mode)
	k := g.kernel(sh.k.name)
	if err := g.setMaxDynamicSmem(k, sh.k.smem()); err != nil {
		t.Fatal(err)
	}
	c.runAndCheck(t, g, twice, func() error {
		return g.skinnyGemm(k, sh, c.out, c.ldo, c.dx, c.ldx, c.dW, c.db16, c.db32, M, K, OC, mode)
	})
}

// projCase is a random projection on the GPU: x (fp16 values, rows padded
// to ldx), W, both biases, and an output buffer of rows padded to ldo that
// is NaN poison, or holds a random residual stream for the residual
// epilogue.
type projCase struct {
	M, K, OC, mode, ldo, ldx int
	x, W, bias, bias16, init []float32
	dx, dW, db16, db32, out  devPtr
}

func newProjCase(t *testing.T, g *gpu, r *rand.Rand, M, K, OC, mode int) *projCase {
	c := &projCase{M: M, K: K, OC: OC, mode: mode, ldo: OC + 24, ldx: K + 8}
	c.W = roundF16(randn(r, OC*K, 1/float32(math.Sqrt(float64(K)))))
	c.bias = randn(r, OC, 0.5)
	c.bias16 = roundF16(c.bias)
	c.x = roundF16(randn(r, M*c.ldx, 1))
	elem := 2
	if c.fp32Out() {
		elem = 4
	}
	c.init = make([]float32, M*c.ldo)
	c.out = devBuf(t, g, elem*M*c.ldo)
	if mode == gemvResidual {
		copy(c.init, randn(r, M*c.ldo, 1))
		c.out = upload(t, g, c.init)
	}
	c.dx, c.dW, c.db16, c.db32 = upload(t, g, toF16(c.x)), upload(t, g, toF16(c.W)), upload(t, g, toF16(c.bias16)), upload(t, g, c.bias)
	return c
}

func (c *projCase) fp32Out() bool { return c.mode == gemvResidual || c.mode == gemvOut32 }

// runAndCheck launches the projection (twice when twice and the epilogue
// does not accumulate: nothing may depend on state a launch leaves behind)
// and checks the output against the float64 reference.
func (c *projCase) runAndCheck(t *testing.T, g *gpu, twice bool, launch func() error) {
	t.Helper()
	launches := 1
	if twice && c.mode != gemvResidual {
		launches = 2
	}
	for i := 0; i < launches; i++ {
		if err := launch(); err != nil {
			t.Fatal(err)
		}
	}
	got := downloadOutput(t, g, c.out, c.M*c.ldo, c.fp32Out())
	checkProjection(t, got, c.init, c.M, c.ldo, c.OC, c.K, c.mode, func(m, k int) float64 { return float64(c.x[m*c.ldx+k]) }, c.W, c.bias16, c.bias)
}

// downloadOutput reads n outputs of a projection, fp32 or fp16, as floats.
func downloadOutput(t *testing.T, g *gpu, out devPtr, n int, fp32Out bool) []float32 {
	t.Helper()
	if fp32Out {
		return download[float32](t, g, out, n)
	}
	return fromF16(download[uint16](t, g, out, n))
}

// checkProjection compares M rows (stride ldo) of a projection's output
// with a float64 reference of out = x @ W^T and the epilogue mode: columns
// past OC must be untouched (init for the residual epilogue, NaN poison
// otherwise), every other one written and within 2e-3 relative error.
func checkProjection(t *testing.T, got, init []float32, M, ldo, OC, K, mode int, x func(m, k int) float64, W, bias16, bias []float32) {
	t.Helper()
	want := make([]float32, 0, M*OC)
	have := make([]float32, 0, M*OC)
	for m := 0; m < M; m++ {
		for n := 0; n < ldo; n++ {
			v := got[m*ldo+n]
			if n >= OC {
				if mode == gemvResidual && v != init[m*ldo+n] || mode != gemvResidual && !math.IsNaN(float64(v)) {
					t.Fatalf("row %d column %d past OC %d was written: %v", m, n, OC, v)
				}
				continue
			}
			if math.IsNaN(float64(v)) {
				t.Fatalf("row %d column %d unwritten", m, n)
			}
			acc := 0.0
			for k := 0; k < K; k++ {
				acc += x(m, k) * float64(W[n*K+k])
			}
			var ref float64
			switch mode {
			case gemvOut16Bias:
				ref = acc + float64(bias16[n])
			case gemvOut16BiasGelu:
				z := acc + float64(bias16[n])
				ref = 0.5 * z * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(z+0.044715*z*z*z)))
			case gemvResidual:
				ref = float64(init[m*ldo+n]) + acc + float64(bias[n])
			default:
				ref = acc
			}
			want, have = append(want, float32(ref)), append(have, v)
		}
	}
	if e := relErr(have, want); e > 2e-3 {
		t.Errorf("rel err %.2e", e)
	}
}
