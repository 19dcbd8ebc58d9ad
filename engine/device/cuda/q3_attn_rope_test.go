package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestQ3AttnRowsRope checks q3_attn_rows_rope, the decode-row attention that
// also normalises, rotates and caches its rows' queries, keys and values,
// against the two kernels it replaces in decode-only steps (q3_qk_rope_kv,
// then q3_attn_rows) on the same random inputs: both caches must be the same
// bits, and the output must agree with a float64 softmax over the queries
// and cache those two left (its row's own key is folded in last, so the sums
// run in another order). Each sequence's new slot holds NaN before, so a key
// or value the kernel did not write, or read before writing, shows.
func TestQ3AttnRowsRope(t *testing.T) {
	if err := Available(); err != nil {
		t.Skipf("no CUDA here: %v", err)
	}
	ctxs := []int{1, 15, 16, 17, 100, 333, 1029}
	for _, G := range []int{1, 2, 5, 8} {
		for _, nsplit := range []int{1, 3, 8} {
			t.Run(fmt.Sprintf("G%d_split%d", G, nsplit), func(t *testing.T) {
				runQ3AttnRowsRope(t, testGPU(t), rand.New(rand.NewPCG(uint64(G), uint64(nsplit))), G, 16, nsplit, ctxs)
			})
		}
	}
}

func runQ3AttnRowsRope(t *testing.T, g *gpu, r *rand.Rand, G, B, nsplit int, ctxs []int) {
	const NKV, HD, eps = q3TestKVHeads, rotaryHeadDim, 1e-6
	NH, rows := G*NKV, len(ctxs)
	c := newQ3Cache(r, ctxs, B)
	pos, seqs, slots := make([]int32, rows), make([]int32, rows), make([]int32, rows)
	nan := math.Float32frombits(0x7fc00000)
	for s, n := range ctxs {
		pos[s], seqs[s] = int32(n-1), int32(s)
		slots[s] = c.bt[s*c.maxBlocks+(n-1)/B]*int32(B) + int32((n-1)%B)
		for kvh := range NKV {
			o := c.at(s, n-1, kvh)
			for d := range HD {
				c.k[o+d], c.v[o+d] = nan, nan
			}
		}
	}
	qkv := randQKV(r, rows, NH)
	qn, kn, rope := randNormRope(r, rows)
	posDev, seqsDev, slotsDev := upload(t, g, pos), upload(t, g, seqs), upload(t, g, slots)
	qnDev, knDev, ropeDev := upload(t, g, qn), upload(t, g, kn), upload(t, g, rope)
	scale := float32(math.Log2E / math.Sqrt(HD))
	type result struct{ att, qkv, k, v []uint16 }
	run := func(fused bool) result {
		qkvDev := upload(t, g, toBF16(qkv))
		dK, dV, dBT, dStride := c.upload(t, g)
		att := devBuf(t, g, 2*rows*NH*HD)
		part := devBuf(t, g, 4*rows*NH*nsplit*(HD+2))
		args := []uint64{argPtr(att), argPtr(part), argPtr(qkvDev), argPtr(dK), argPtr(dV), argPtr(posDev), argPtr(seqsDev),
			argPtr(0), argPtr(seqsDev), argPtr(dBT), argPtr(dStride), argInt(NH), argInt(NKV), argInt(B), argF32(scale), argInt(nsplit)}
		name := "q3_attn_rows"
		if fused {
			name = "q3_attn_rows_rope"
			args = append(args, argPtr(qnDev), argPtr(knDev), argPtr(ropeDev), argPtr(slotsDev), argF32(eps))
		} else {
			if err := g.launchQKRopeKV(g.kernel("q3_qk_rope_kv"), qkvDev, rows, ropeKV{kc: dK, vc: dV, qNorm: qnDev, kNorm: knDev,
				rope: ropeDev, slots: slotsDev, NH: NH, NKV: NKV, B: B, eps: eps}); err != nil {
				t.Fatal(err)
			}
		}
		if err := g.launch(g.kernel(name), rows, NKV, nsplit, 128, 0, args...); err != nil {
			t.Fatal(err)
		}
		if nsplit > 1 {
			if err := g.launch(g.kernel("q3_attn_combine"), rows, NH, 1, HD, 0, argPtr(att), argPtr(part), argPtr(seqsDev),
				argPtr(seqsDev), argInt(NH), argInt(nsplit)); err != nil {
				t.Fatal(err)
			}
		}
		return result{download[uint16](t, g, att, rows*NH*HD), download[uint16](t, g, qkvDev, len(qkv)),
			download[uint16](t, g, dK, len(c.k)), download[uint16](t, g, dV, len(c.v))}
	}
	ref, got := run(false), run(true)
	for name, x := range map[string][2][]uint16{"key cache": {got.k, ref.k}, "value cache": {got.v, ref.v}} {
		for i := range x[1] {
			if x[0][i] != x[1][i] {
				t.Fatalf("%s element %d: %#04x, want %#04x (q3_qk_rope_kv's)", name, i, x[0][i], x[1][i])
			}
		}
	}
	// The float64 attention over the rotated queries (q3_qk_rope_kv rotates
	// them in place) and the cache with the rows' new keys and values.
	fromBF16 := func(h []uint16) []float32 {
		f := make([]float32, len(h))
		for i, x := range h {
			f[i] = bf16ToF32(x)
		}
		return f
	}
	c.k, c.v = fromBF16(ref.k), fromBF16(ref.v)
	q := fromBF16(ref.qkv)
	width := (NH + 2*NKV) * HD
	var want, mag []float64
	for s, n := range ctxs {
		for h := range NH {
			want, mag = c.attend(want, mag, q[s*width+h*HD:], s, h/G, n)
		}
	}
	checkAttention(t, got.att, want, mag, func(i int) string {
		return fmt.Sprintf("context %d head %d dim %d", ctxs[i/(NH*HD)], i/HD%NH, i%HD)
	})
}

// randNormRope returns random q_norm and k_norm weights (about 1) and a
// rotation table of rows rows: (cos, sin) of random angles for each of a
// 128-dim head's 64 pairs, as q3_embed lays it out.
func randNormRope(r *rand.Rand, rows int) (qn, kn, rope []float32) {
	qn, kn = make([]float32, rotaryHeadDim), make([]float32, rotaryHeadDim)
	for d := range rotaryHeadDim {
		qn[d], kn[d] = float32(1+0.2*r.NormFloat64()), float32(1+0.2*r.NormFloat64())
	}
	rope = make([]float32, rows*rotaryHeadDim)
	for i := 0; i < len(rope); i += 2 {
		a := 2 * math.Pi * r.Float64()
		rope[i], rope[i+1] = float32(math.Cos(a)), float32(math.Sin(a))
	}
	return qn, kn, rope
}
