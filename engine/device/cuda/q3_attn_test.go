package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestQ3AttnRows checks the rotary block's decode-row attention kernel
// (q3_attn_rows, with q3_attn_combine behind its key slices) against a
// float64 softmax over the same bf16 inputs: group sizes 1, 2, 5 and 8
// query heads a KV head, block sizes 8, 16 and 32, contexts from one key to
// over a thousand (so a warp runs many steps of its online softmax), and
// whole, three and eight key slices. Cache slots past a sequence's last key
// hold NaN and block-table entries past its last block are -1: a key read
// that should not happen turns into a NaN in the output or a fault.
func TestQ3AttnRows(t *testing.T) {
	if err := Available(); err != nil {
		t.Skipf("no CUDA here: %v", err)
	}
	ctxs := []int{1, 15, 16, 17, 100, 333, 1029}
	for _, G := range []int{1, 2, 5, 8} {
		for _, B := range []int{8, 16, 32} {
			for _, nsplit := range []int{1, 3, 8} {
				t.Run(fmt.Sprintf("G%d_B%d_split%d", G, B, nsplit), func(t *testing.T) {
					runQ3AttnRows(t, testGPU(t), rand.New(rand.NewPCG(uint64(G), uint64(B*100+nsplit))), G, B, nsplit, ctxs)
				})
			}
		}
	}
}

func runQ3AttnRows(t *testing.T, g *gpu, r *rand.Rand, G, B, nsplit int, ctxs []int) {
	const NKV, HD = 2, rotaryHeadDim
	NH, rows := G*NKV, len(ctxs)
	width := (NH + 2*NKV) * HD
	maxBlocks := ceilDiv(slices.Max(ctxs), B) + 1 // one -1 entry past every sequence's blocks
	numBlocks := 0
	for _, c := range ctxs {
		numBlocks += ceilDiv(c, B)
	}
	perm := r.Perm(numBlocks)
	bt := make([]int32, rows*maxBlocks)
	for i := range bt {
		bt[i] = -1
	}
	next := 0
	for s, c := range ctxs {
		for b := range ceilDiv(c, B) {
			bt[s*maxBlocks+b] = int32(perm[next])
			next++
		}
	}
	nan := math.Float32frombits(0x7fc00000)
	cacheElems := numBlocks * NKV * B * HD
	kc, vc := make([]float32, cacheElems), make([]float32, cacheElems)
	for i := range kc {
		kc[i], vc[i] = nan, nan
	}
	at := func(s, pos, kvh int) int {
		return ((int(bt[s*maxBlocks+pos/B])*NKV+kvh)*B + pos%B) * HD
	}
	for s, c := range ctxs {
		for pos := range c {
			for kvh := range NKV {
				o := at(s, pos, kvh)
				for d := range HD {
					kc[o+d], vc[o+d] = bf16Round(float32(r.NormFloat64())), bf16Round(float32(r.NormFloat64()))
				}
			}
		}
	}
	qkv := make([]float32, rows*width)
	for i := range qkv {
		qkv[i] = bf16Round(float32(2 * r.NormFloat64())) // scores with a standard deviation of about 2
	}
	pos, seqs := make([]int32, rows), make([]int32, rows)
	for s, c := range ctxs {
		pos[s], seqs[s] = int32(c-1), int32(s)
	}
	toBF := func(x []float32) []uint16 {
		out := make([]uint16, len(x))
		for i, f := range x {
			out[i] = f32ToBF16(f)
		}
		return out
	}
	// The float64 reference first: out[(s*NH+h)*HD+d].
	want := make([]float64, rows*NH*HD)
	for s, c := range ctxs {
		for h := range NH {
			kvh := h / G
			q := qkv[s*width+h*HD : s*width+(h+1)*HD]
			sc := make([]float64, c)
			mx := math.Inf(-1)
			for j := range c {
				k := kc[at(s, j, kvh):]
				dot := 0.0
				for d := range HD {
					dot += float64(q[d]) * float64(k[d])
				}
				sc[j] = dot / math.Sqrt(HD)
				mx = math.Max(mx, sc[j])
			}
			sum := 0.0
			for j := range sc {
				sc[j] = math.Exp(sc[j] - mx)
				sum += sc[j]
			}
			for d := range HD {
				acc := 0.0
				for j := range c {
					acc += sc[j] * float64(vc[at(s, j, kvh)+d])
				}
				want[(s*NH+h)*HD+d] = acc / sum
			}
		}
	}
	seqsDev := upload(t, g, seqs)
	dQKV, dK, dV := upload(t, g, toBF(qkv)), upload(t, g, toBF(kc)), upload(t, g, toBF(vc))
	dPos, dBT, dStride := upload(t, g, pos), upload(t, g, bt), upload(t, g, []int32{int32(maxBlocks)})
	scaleLog2 := float32(math.Log2E / math.Sqrt(HD))
	att := devBuf(t, g, 2*rows*NH*HD)
	part := devBuf(t, g, 4*rows*NH*nsplit*(HD+2))
	if err := g.launch(g.kernel("q3_attn_rows"), rows, NKV, nsplit, 128, 0, argPtr(att), argPtr(part), argPtr(dQKV), argPtr(dK),
		argPtr(dV), argPtr(dPos), argPtr(seqsDev), argPtr(seqsDev), argPtr(dBT), argPtr(dStride), argInt(NH), argInt(NKV), argInt(B),
		argF32(scaleLog2), argInt(nsplit)); err != nil {
		t.Fatal(err)
	}
	if nsplit > 1 {
		if err := g.launch(g.kernel("q3_attn_combine"), rows, NH, 1, HD, 0, argPtr(att), argPtr(part), argPtr(seqsDev),
			argPtr(seqsDev), argInt(NH), argInt(nsplit)); err != nil {
			t.Fatal(err)
		}
	}
	raw := download[uint16](t, g, att, rows*NH*HD)
	worst := 0.0
	for s, c := range ctxs {
		for h := range NH {
			for d := range HD {
				i := (s*NH+h)*HD + d
				got := float64(bf16ToF32(raw[i]))
				err := math.Abs(got - want[i])
				worst = math.Max(worst, err)
				// bf16 output (2^-9 relative) plus the MMAs' bf16 P (hi and lo)
				if !(err <= 2e-3+4e-3*math.Abs(want[i])) {
					t.Fatalf("context %d head %d dim %d: got %.5f, want %.5f", c, h, d, got, want[i])
				}
			}
		}
	}
	t.Logf("worst abs error %.2e", worst)
}

func bf16Round(f float32) float32 { return bf16ToF32(f32ToBF16(f)) }

func bf16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
