package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// gpt2LikeResidual is M rows of C residual values as GPT-2's look: mostly
// O(1), a mean away from zero, and two outlier channels of a few hundred,
// which make the LayerNorm fold's mean and variance terms large.
func gpt2LikeResidual(r *rand.Rand, M, C int) []float32 {
	x := randn(r, M*C, 1)
	for m := 0; m < M; m++ {
		for c := 0; c < C; c++ {
			x[m*C+c] += 0.7
		}
		x[m*C+C/5] += 300 + 50*float32(r.NormFloat64())
		x[m*C+C/2] -= 120
	}
	return x
}

// refLNGelu is gelu(LayerNorm(x; gamma, beta, eps) W^T + b) for one row in
// float64; W is (out, in) and b the fp16-rounded bias.
func refLNGelu(x, gamma, beta, W, b []float32, eps float32) []float64 {
	C, OC := len(x), len(b)
	mean, v := 0.0, 0.0
	for _, e := range x {
		mean += float64(e)
	}
	mean /= float64(C)
	for _, e := range x {
		v += (float64(e) - mean) * (float64(e) - mean)
	}
	rstd := 1 / math.Sqrt(v/float64(C)+float64(eps))
	out := make([]float64, OC)
	for n := 0; n < OC; n++ {
		z := float64(b[n])
		for k := 0; k < C; k++ {
			z += ((float64(x[k])-mean)*rstd*float64(gamma[k]) + float64(beta[k])) * float64(W[n*C+k])
		}
		out[n] = 0.5 * z * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(z+0.044715*z*z*z)))
	}
	return out
}

// TestLNFoldColumns checks the fold's algebra on the host (no GPU):
// rstd (x * gamma) W^T - rstd mean s + b' equals LN(x) W^T + b.
func TestLNFoldColumns(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	const C, OC = 64, 48
	gamma, beta := randn(r, C, 1), randn(r, C, 0.2)
	w := randn(r, C*OC, 0.1) // HF Conv1D: (in, out)
	b := randn(r, OC, 0.5)
	s, bp := lnFoldColumns(gamma, beta, w, b)
	x := gpt2LikeResidual(r, 1, C)
	W := make([]float32, OC*C) // (out, in), fp16-rounded as the device holds it
	for k := 0; k < C; k++ {
		for n := 0; n < OC; n++ {
			W[n*C+k] = roundF16([]float32{w[k*OC+n]})[0]
		}
	}
	mean, v := 0.0, 0.0
	for _, e := range x {
		mean += float64(e)
	}
	mean /= C
	for _, e := range x {
		v += (float64(e) - mean) * (float64(e) - mean)
	}
	rstd := 1 / math.Sqrt(v/C+1e-5)
	b16 := roundF16(b)
	for n := 0; n < OC; n++ {
		folded, direct := 0.0, float64(b16[n])
		for k := 0; k < C; k++ {
			folded += float64(x[k]) * float64(gamma[k]) * float64(W[n*C+k])
			direct += ((float64(x[k])-mean)*rstd*float64(gamma[k]) + float64(beta[k])) * float64(W[n*C+k])
		}
		folded = rstd*folded - rstd*mean*float64(s[n]) + float64(bp[n])
		if math.Abs(folded-direct) > 1e-4*math.Max(1, math.Abs(direct)) {
			t.Fatalf("column %d: folded %v, direct %v", n, folded, direct)
		}
	}
}

// TestWgmmaLNFold runs attproj with the stats epilogue and fc with the
// fold, as a decode step does, as two kernels (gemm_wg_ln_n<BN>) and as one
// grid (gemm_wg_pair), against float64 references: the residual stream
// after attproj, and gelu(LN(it) W_fc^T + b_fc). fc's output starts as NaN
// poison; rows past M must stay untouched.
func TestWgmmaLNFold(t *testing.T) {
	g := testGPU(t)
	if kernelArch(wgFile, g.arch, g.nv.major) == "" {
		t.Skipf("gemm_wg.cu is built for sm_90a by NVRTC 12+ only; here %s, NVRTC %d.%d", g.arch, g.nv.major, g.nv.minor)
	}
	r := rand.New(rand.NewPCG(53, 54))
	const C, eps = 768, float32(1e-5)
	for _, M := range []int{128, 64, 45} {
		for _, pair := range []bool{false, true} {
			t.Run(fmt.Sprintf("M%d pair %v", M, pair), func(t *testing.T) { runLNFoldCase(t, testGPU(t), r, M, C, eps, pair) })
		}
	}
}

func runLNFoldCase(t *testing.T, g *gpu, r *rand.Rand, M, C int, eps float32, pair bool) {
	OC := 4 * C
	rows := ceilDiv(M, wgTileM) * wgTileM // the x maps cover every row of the last tile
	xAttn := roundF16(randn(r, rows*C, 1))
	wp := roundF16(randn(r, C*C, 1/float32(math.Sqrt(float64(C))))) // (out, in)
	bp := randn(r, C, 0.5)
	prior := gpt2LikeResidual(r, M, C)
	gamma, beta := randn(r, C, 0.3), randn(r, C, 0.1)
	wfHF := randn(r, C*OC, 1/float32(math.Sqrt(float64(C)))) // (in, out)
	bf := randn(r, OC, 0.5)
	s, bprime := lnFoldColumns(gamma, beta, wfHF, bf)
	wf := make([]float32, OC*C) // (out, in)
	for k := 0; k < C; k++ {
		for n := 0; n < OC; n++ {
			wf[n*C+k] = wfHF[k*OC+n]
		}
	}
	wf = roundF16(wf)

	dRes := upload(t, g, prior)
	dX16 := devBuf(t, g, 2*rows*C)
	dFC := devBuf(t, g, 2*M*OC)
	stats := upload(t, g, make([]float32, 2*M))
	arena, err := newCArena(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer arena.free()
	host, _ := arena.alloc(5 * tensorMapBytes)
	host = unsafe.Pointer((uintptr(host) + 63) &^ 63)
	maps := make([]unsafe.Pointer, 4)
	for i, m := range []struct {
		p                 devPtr
		rows, cols, boxes int
	}{{upload(t, g, toF16(xAttn)), rows, C, wgTileM}, {upload(t, g, toF16(wp)), C, C, wgWeightBoxRows},
		{dX16, rows, C, wgTileM}, {upload(t, g, toF16(wf)), OC, C, wgWeightBoxRows}} {
		maps[i] = unsafe.Add(host, i*tensorMapBytes)
		if err := g.encodeTensorMap(maps[i], arena, m.p, m.rows, m.cols, m.cols, m.boxes); err != nil {
			t.Fatal(err)
		}
	}
	for _, kind := range wgTilesN {
		if err := g.setMaxDynamicSmem(g.kernel(wgKernelName(kind, wgLN)), wgSmem(kind, C)); err != nil {
			t.Fatal(err)
		}
	}
	bnP, bnF := wgTileN(g.smCount, M, C), wgTileN(g.smCount, M, OC)
	dBp, dGamma, dS, dBprime := upload(t, g, bp), upload(t, g, gamma), upload(t, g, s), upload(t, g, bprime)
	if pair {
		if bnP != wgPairTileA {
			t.Fatalf("attproj in %d-column tiles at %d rows; gemm_wg_pair takes %d", bnP, M, wgPairTileA)
		}
		k := g.kernel(wgPairKernelName(bnF))
		if err := g.setMaxDynamicSmem(k, wgPairSmem(bnF, C)); err != nil {
			t.Fatal(err)
		}
		args := wgPairArgs{maps: [4]uintptr{uintptr(maps[0]), uintptr(maps[1]), uintptr(maps[2]), uintptr(maps[3])},
			resid: dRes, fcOut: dFC, biasA: dBp, gammaA: dGamma, sB: dS, bB: dBprime,
			stats: stats, x16: dX16, counter: upload(t, g, []uint32{0}), eps: eps}
		if err := g.wgPairGemm(bnF, wgPairGrid(M, C, bnF), M, C, args); err != nil {
			t.Fatal(err)
		}
	} else {
		if err := g.wgGemm(bnP, wgClusterFor(4, C/bnP), 1, dRes, C, uintptr(maps[0]), uintptr(maps[1]), 0, dBp, M, C, C,
			wgResidualLNStats, wgLNArgs{lns: dGamma, stats: stats, x16: dX16, eps: eps}); err != nil {
			t.Fatal(err)
		}
		if err := g.wgGemm(bnF, wgClusterFor(4, OC/bnF), 1, dFC, OC, uintptr(maps[2]), uintptr(maps[3]), 0, dBprime, M, C, OC,
			wgOut16LNFoldGelu, wgLNArgs{lns: dS, stats: stats, eps: eps}); err != nil {
			t.Fatal(err)
		}
	}
	res := download[float32](t, g, dRes, M*C)
	fc := fromF16(download[uint16](t, g, dFC, M*OC))

	wantRes := make([]float32, M*C)
	for m := 0; m < M; m++ {
		for n := 0; n < C; n++ {
			acc := float64(prior[m*C+n]) + float64(bp[n])
			for k := 0; k < C; k++ {
				acc += float64(xAttn[m*C+k]) * float64(wp[n*C+k])
			}
			wantRes[m*C+n] = float32(acc)
		}
	}
	if e := relErr(res, wantRes); e > 2e-3 {
		t.Errorf("residual after attproj: rel err %.2e", e)
	}
	wantFC := make([]float32, 0, M*OC)
	b16 := roundF16(bf)
	for m := 0; m < M; m++ {
		for _, v := range refLNGelu(wantRes[m*C:(m+1)*C], gamma, beta, wf, b16, eps) {
			wantFC = append(wantFC, float32(v))
		}
	}
	for i, v := range fc {
		if math.IsNaN(float64(v)) {
			t.Fatalf("fc output %d (row %d) unwritten", i, i/OC)
		}
	}
	// The fold reads x * gamma in fp16 where the LayerNorm kernel writes the
	// normalised row in fp16: the same rounding, on another term.
	if e := relErr(fc, wantFC); e > 5e-3 {
		t.Errorf("fc after the folded LayerNorm: rel err %.2e", e)
	} else {
		t.Logf("M %d: residual rel err %.2e, fc rel err %.2e", M, relErr(res, wantRes), e)
	}
}
