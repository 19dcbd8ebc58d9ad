package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestQ3GemmWS holds q3_gemm_ws.cu's two epilogues to float64 sums of the
// same bf16 operands: row counts that end inside a 128-row tile, several
// tiles a block (the persistent grid loops), K of one to sixteen k tiles.
func TestQ3GemmWS(t *testing.T) {
	wsTestGPU(t) // skips where the kernels are not built
	r := rand.New(rand.NewPCG(53, 54))
	for _, c := range []struct {
		M, K, N, group, cluster int
		name                    string
	}{
		{2048, 1024, 6144, q3GemmWSGroup, 1, q3GemmWSSwiGLU}, // Qwen3-0.6B's gate|up: 16 x 24 tiles, about 3 a block
		{2048, 1024, 6144, q3GemmWSGroup, 2, q3GemmWSSwiGLU}, // pairs of row tiles sharing each weight tile
		{2048, 1024, 6144, 5, 1, q3GemmWSSwiGLU},             // groups of 5 row tiles, the last one of 1
		{300, 1024, 6144, q3GemmWSGroup, 1, q3GemmWSSwiGLU},
		{300, 1024, 6144, 6, 2, q3GemmWSSwiGLU}, // 3 row tiles: the second pair's second block past M
		{129, 192, 512, 0, 1, q3GemmWSSwiGLU},   // column tile outermost
		{1000, 1024, 4096, 3, 1, q3GemmWSOut},
		{1000, 1024, 4096, 0, 2, q3GemmWSOut},
		{77, 64, 256, q3GemmWSGroup, 2, q3GemmWSOut},
	} {
		t.Run(fmt.Sprintf("%s_M%d_K%d_N%d_group%d_cluster%d", c.name, c.M, c.K, c.N, c.group, c.cluster), func(t *testing.T) {
			runQ3GemmWSCase(t, testGPU(t), r, c.M, c.K, c.N, c.group, c.cluster, c.name)
		})
	}
}

func runQ3GemmWSCase(t *testing.T, g *gpu, r *rand.Rand, M, K, N, group, cluster int, name string) {
	x := roundBF16(randn(r, M*K, 1))
	W := roundBF16(randn(r, N*K, 1/float32(math.Sqrt(float64(K)))))
	cols := N
	if name == q3GemmWSSwiGLU {
		cols = N / 2
	}
	out := devBuf(t, g, 2*(M+1)*cols) // NaN in bf16: a row past M must stay so
	dx, dW := upload(t, g, toBF16(x)), upload(t, g, toBF16(W))
	xp, wp := testTMAMaps(t, g, dx, M, K, K, q3GemmWSTileM, dW, N, q3GemmWSWBox)
	if err := g.q3GemmWS(name, out, xp, wp, M, K, N, group, cluster); err != nil {
		t.Fatal(err)
	}
	if err := g.sync(); err != nil {
		t.Fatal(err)
	}
	got := download[uint16](t, g, out, (M+1)*cols)
	dot := func(m, n int) float64 {
		acc := 0.0
		for k := 0; k < K; k++ {
			acc += float64(x[m*K+k]) * float64(W[n*K+k])
		}
		return acc
	}
	// Large cases check the values of every eighth row and of each tile's
	// last eight (the float64 sums of all would take the host minutes).
	checkRow := func(m int) bool { return M <= 512 || m%8 == 0 || m%q3GemmWSTileM >= q3GemmWSTileM-8 }
	worst := 0.0
	for m := 0; m <= M; m++ {
		for n := 0; n < cols; n++ {
			v := float64(bf16ToF32(got[m*cols+n]))
			if m == M {
				if !math.IsNaN(v) {
					t.Fatalf("row %d (of %d) column %d was written: %v", m, M, n, v)
				}
				continue
			}
			if !checkRow(m) {
				if math.IsNaN(v) {
					t.Fatalf("row %d column %d was not written", m, n)
				}
				continue
			}
			want := dot(m, n)
			if name == q3GemmWSSwiGLU {
				gate, up := dot(m, 2*n), dot(m, 2*n+1)
				want = gate / (1 + math.Exp(-gate)) * up
			}
			if tol := 1e-3 + math.Abs(want)/128; math.IsNaN(v) || math.Abs(v-want) > tol {
				t.Fatalf("row %d column %d: got %v, want %v (tolerance %.2g)", m, n, v, want, tol)
			}
			worst = max(worst, math.Abs(v-want)/(1+math.Abs(want)))
		}
	}
	t.Logf("worst error %.3g relative to 1 + |want|", worst)
}

// TestQ3GemmWSQKV holds q3_gemm_ws_qkv to the two launches it replaces,
// q3_gemm_ws_out (held to float64 above) and q3_qk_rope_kv, on the same
// inputs: values bit for bit, queries and keys within a bf16 rounding of
// theirs (the sum of squares runs in another order). Rows past M, the
// keys' and values' columns of the q|k|v rows and every cache slot no row
// takes (rows with slot -1 among them) start as NaN and must stay so.
func TestQ3GemmWSQKV(t *testing.T) {
	wsTestGPU(t) // skips where the kernels are not built
	r := rand.New(rand.NewPCG(55, 56))
	for _, c := range []struct{ M, K, NH, NKV, group, cluster int }{
		{2048, 1024, 16, 8, q3GemmWSGroup, 2}, // Qwen3-0.6B: 16 x 16 tiles
		{2048, 1024, 16, 8, 5, 1},
		{300, 256, 4, 2, q3GemmWSGroup, 1}, // the rotary tests' block
		{129, 64, 2, 2, 0, 2},
	} {
		t.Run(fmt.Sprintf("M%d_K%d_heads%d_kv%d_group%d_cluster%d", c.M, c.K, c.NH, c.NKV, c.group, c.cluster), func(t *testing.T) {
			runQ3GemmWSQKVCase(t, testGPU(t), r, c.M, c.K, c.NH, c.NKV, c.group, c.cluster)
		})
	}
}

func runQ3GemmWSQKVCase(t *testing.T, g *gpu, r *rand.Rand, M, K, NH, NKV, group, cluster int) {
	const HD, B, eps = rotaryHeadDim, 16, 1e-6
	N := (NH + 2*NKV) * HD
	x := roundBF16(randn(r, M*K, 1))
	W := roundBF16(randn(r, N*K, 1/float32(math.Sqrt(float64(K)))))
	qn, kn, rope := randNormRope(r, M)
	blocks := ceilDiv(M, B) + 2
	slots := make([]int32, M)
	for i, s := range r.Perm(blocks * B)[:M] {
		slots[i] = int32(s)
		if i%7 == 3 {
			slots[i] = -1
		}
	}
	dx, dW := upload(t, g, toBF16(x)), upload(t, g, toBF16(W))
	dqn, dkn, drope, dslots := upload(t, g, qn), upload(t, g, kn), upload(t, g, rope), upload(t, g, slots)
	xp, wp := testTMAMaps(t, g, dx, M, K, K, q3GemmWSTileM, dW, N, q3GemmWSWBox)
	cacheElems := blocks * NKV * B * HD
	rk := func(kc, vc devPtr) ropeKV {
		return ropeKV{kc: kc, vc: vc, qNorm: dqn, kNorm: dkn, rope: drope, slots: dslots, NH: NH, NKV: NKV, B: B, eps: eps}
	}
	type result struct{ qkv, k, v []uint16 }
	run := func(fused bool) result {
		qkv := devBuf(t, g, 2*(M+1)*N) // NaN in bf16
		kc, vc := devBuf(t, g, 2*cacheElems), devBuf(t, g, 2*cacheElems)
		if fused {
			if err := g.q3GemmWS(q3GemmWSQKV, qkv, xp, wp, M, K, N, group, cluster, q3GemmWSQKVArgs(rk(kc, vc))...); err != nil {
				t.Fatal(err)
			}
		} else {
			if err := g.q3GemmWS(q3GemmWSOut, qkv, xp, wp, M, K, N, group, cluster); err != nil {
				t.Fatal(err)
			}
			if err := g.launchQKRopeKV(g.kernel("q3_qk_rope_kv"), qkv, M, rk(kc, vc)); err != nil {
				t.Fatal(err)
			}
		}
		if err := g.sync(); err != nil {
			t.Fatal(err)
		}
		return result{download[uint16](t, g, qkv, (M+1)*N), download[uint16](t, g, kc, cacheElems), download[uint16](t, g, vc, cacheElems)}
	}
	ref, got := run(false), run(true)
	const nan = 0xffff
	inexact := 0
	// check compares element i of a result with the reference's: the same
	// bits (values, and NaN where nothing may write), or within 2^-7 of it
	// where rounded (queries and keys).
	check := func(what string, i int, gotBits, wantBits uint16, rounded bool) {
		if gotBits == wantBits {
			return
		}
		v, want := float64(bf16ToF32(gotBits)), float64(bf16ToF32(wantBits))
		if !rounded || math.IsNaN(v) || math.IsNaN(want) || math.Abs(v-want) > math.Abs(want)/128+1e-6 {
			t.Fatalf("%s element %d: %#04x (%v), want %#04x (%v)", what, i, gotBits, v, wantBits, want)
		}
		inexact++
	}
	for m := 0; m <= M; m++ {
		for n := 0; n < N; n++ {
			i := m*N + n
			want := ref.qkv[i]
			if m == M || n >= NH*HD {
				want = nan // q|k|v's kernel writes the queries of rows 0..M-1 only
			}
			check(fmt.Sprintf("q|k|v row %d column", m), n, got.qkv[i], want, true)
		}
	}
	for i := range cacheElems {
		check("key cache", i, got.k[i], ref.k[i], true)
		check("value cache", i, got.v[i], ref.v[i], false)
	}
	t.Logf("%d of %d queries and keys one rounding off q3_qk_rope_kv's", inexact, M*(NH+NKV)*HD)
}

// wsTestGPU is the test GPU with q3_gemm_ws.cu's kernels loaded and given
// their shared memory (skipping where they are not built).
func wsTestGPU(t *testing.T) *gpu {
	t.Helper()
	g := wgTestGPU(t, q3GemmWSFile, q3GemmWSKernels)
	for _, name := range q3GemmWSKernels {
		if err := g.setMaxDynamicSmem(g.kernels[name], q3GemmWSSmem); err != nil {
			t.Fatal(err)
		}
	}
	return g
}
