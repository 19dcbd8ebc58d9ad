//go:build cudalab

package cuda

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestLabQ3GemmWSTime (ROSEINFER_LAB_GEMMWS=1, the lab's build) times
// q3_gemm_ws.cu at Qwen3-0.6B's gate|up of a 16,384-token step (16,384 x
// 1,024 x 6,144) in clusters of one and two, with and without SwiGLU,
// beside cuBLASLt's bf16 GEMM of the same shape, and its q|k|v (4,096
// columns) against cuBLASLt and q3_qk_rope_kv: numbers for a log, no
// verdict (TestQ3GemmWS and TestQ3GemmWSQKV hold the values).
func TestLabQ3GemmWSTime(t *testing.T) {
	labOptIn(t, "ROSEINFER_LAB_GEMMWS", "time q3_gemm_ws.cu")
	g := wsTestGPU(t)
	const M, K, N, reps = 16384, 1024, 6144, 20
	r := rand.New(rand.NewPCG(1, 2))
	x, W := randn(r, M*K, 1), randn(r, N*K, 0.03)
	dx, dW := upload(t, g, toBF16(x)), upload(t, g, toBF16(W))
	out := devBuf(t, g, 2*M*N)
	xp, wp := testTMAMaps(t, g, dx, M, K, K, q3GemmWSTileM, dW, N, q3GemmWSWBox)
	d := &Device{g: g}
	timeIt := func(what string, launch func() error) {
		ms, err := d.timeMedian(reps, launch)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%-32s %8.1f us", what, 1000*ms)
	}
	for _, name := range []string{q3GemmWSSwiGLU, q3GemmWSOut} {
		for _, cluster := range []int{1, 2} {
			timeIt(fmt.Sprintf("%s c%d M%d", name, cluster, M), func() error {
				return g.q3GemmWS(name, out, xp, wp, M, K, N, q3GemmWSGroup, cluster)
			})
		}
	}
	timeIt("cuBLASLt bf16", func() error {
		return g.blas.gemmTyped(g.stream, out, dataR16BF, N, dx, dW, dataR16BF, 0, M, K, N, epilogueDefault, false)
	})
	// The step's two launches against the fused one, by rows.
	hidden := devBuf(t, g, M*N)
	for _, m := range []int{129, 256, 512, 1024, 2048, 4096, 8192, 16384} {
		timeIt(fmt.Sprintf("q3_gemm_ws_swiglu c2 M%d", m), func() error {
			return g.q3GemmWS(q3GemmWSSwiGLU, hidden, xp, wp, m, K, N, q3GemmWSGroup, 2)
		})
		timeIt(fmt.Sprintf("cuBLASLt + q3_swiglu M%d", m), func() error {
			if err := g.blas.gemmTyped(g.stream, out, dataR16BF, N, dx, dW, dataR16BF, 0, m, K, N, epilogueDefault, false); err != nil {
				return err
			}
			gx, gy := q3SwiGLUGrid(m, N/2)
			return g.launch(g.kernel("q3_swiglu"), gx, gy, 1, 256, 0, argPtr(hidden), argPtr(out), argInt(m), argInt(N/2))
		})
	}
	// q|k|v: N 4,096 (16 query heads, 8 KV heads), each row's slot its own.
	const NH, NKV, HD, B, NQKV = 16, 8, rotaryHeadDim, 16, 4096
	slots := make([]int32, M)
	for i := range slots {
		slots[i] = int32(i)
	}
	rope := make([]float32, M*HD)
	for i := 0; i < len(rope); i += 2 {
		rope[i], rope[i+1] = 0.6, 0.8
	}
	norm := make([]float32, HD)
	for d := range norm {
		norm[d] = 1
	}
	dslots, drope, dnorm := upload(t, g, slots), upload(t, g, rope), upload(t, g, norm)
	kc, vc := devBuf(t, g, 2*M*NKV*HD), devBuf(t, g, 2*M*NKV*HD)
	rk := ropeKV{kc: kc, vc: vc, qNorm: dnorm, kNorm: dnorm, rope: drope, slots: dslots, NH: NH, NKV: NKV, B: B, eps: 1e-6}
	_, wq := testTMAMaps(t, g, dx, M, K, K, q3GemmWSTileM, dW, NQKV, q3GemmWSWBox)
	timeIt(fmt.Sprintf("q3_gemm_ws_out c2 M%d N%d", M, NQKV), func() error { // the mainloop alone
		return g.q3GemmWS(q3GemmWSOut, out, xp, wq, M, K, NQKV, q3GemmWSGroup, 2)
	})
	for _, m := range []int{1024, 2048, 4096, 8192, 16384} {
		timeIt(fmt.Sprintf("q3_gemm_ws_qkv c2 M%d", m), func() error {
			return g.q3GemmWS(q3GemmWSQKV, out, xp, wq, m, K, NQKV, q3GemmWSGroup, 2, q3GemmWSQKVArgs(rk)...)
		})
		timeIt(fmt.Sprintf("cuBLASLt + q3_qk_rope_kv M%d", m), func() error {
			if err := g.blas.gemmTyped(g.stream, out, dataR16BF, NQKV, dx, dW, dataR16BF, 0, m, K, NQKV, epilogueDefault, false); err != nil {
				return err
			}
			return g.launchQKRopeKV(g.kernel("q3_qk_rope_kv"), out, m, rk)
		})
	}
}
