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
// that should not happen turns into a NaN in the output or a fault. Each
// runs once with the blocks one KV head at a time (no dec_runs) and once
// with dec_runs splitting the rows into runs of 2, 1 and 4 (every row and
// head must still be attended once).
func TestQ3AttnRows(t *testing.T) {
	if err := Available(); err != nil {
		t.Skipf("no CUDA here: %v", err)
	}
	ctxs := []int{1, 15, 16, 17, 100, 333, 1029}
	runs := []int32{0, 2, 0, 2, 2, 1, 3, 4, 3, 4, 3, 4, 3, 4}
	for _, G := range []int{1, 2, 5, 8} {
		for _, B := range []int{8, 16, 32} {
			for _, nsplit := range []int{1, 3, 8} {
				for _, rs := range [][]int32{nil, runs} {
					t.Run(fmt.Sprintf("G%d_B%d_split%d_runs%v", G, B, nsplit, rs != nil), func(t *testing.T) {
						r := rand.New(rand.NewPCG(uint64(G), uint64(B*100+nsplit)))
						runQ3AttnRows(t, testGPU(t), r, G, B, nsplit, ctxs, rs)
					})
				}
			}
		}
	}
}

// TestQ3AttnPrefill checks the prompt-chunk attention kernels
// (q3_attn_prefill, and q3_attn_wg.cu's on sm_90a, its keys and values
// through tensor maps of the cache) the same way: chunks with
// and without cached prefixes, of one row to several 64-row tiles, each row
// attending causally over its sequence's cache.
func TestQ3AttnPrefill(t *testing.T) {
	if err := Available(); err != nil {
		t.Skipf("no CUDA here: %v", err)
	}
	chunks := [][2]int{{0, 300}, {100, 77}, {1000, 5}, {17, 64}, {0, 1}, {63, 130}} // cached, new
	for _, kern := range []struct {
		name string
		smem int
	}{{"q3_attn_prefill", rotaryPrefillSmem}, {q3AttnWGKernel, rotaryPrefillWGSmem}} {
		for _, G := range []int{1, 2, 5, 8} {
			for _, B := range []int{8, 16, 32} {
				t.Run(fmt.Sprintf("%s_G%d_B%d", kern.name, G, B), func(t *testing.T) {
					g := testGPU(t)
					if kern.name != "q3_attn_prefill" && kernelArch(q3AttnWGFile, g.arch, g.nv.major) == "" {
						t.Skipf("%s is built for sm_90a by NVRTC 12+ only; here %s", q3AttnWGFile, g.arch)
					}
					runQ3AttnPrefill(t, g, kern.name, kern.smem, rand.New(rand.NewPCG(uint64(G), uint64(B))), G, B, chunks)
				})
			}
		}
	}
}

const q3TestKVHeads = 2

// q3Cache is a paged cache of random bf16 keys and values for sequences of
// the given lengths, blocks in random order; NaN in every slot no sequence
// fills, -1 past each sequence's blocks in its table.
type q3Cache struct {
	B, maxBlocks int
	bt           []int32
	k, v         []float32
}

func newQ3Cache(r *rand.Rand, lens []int, B int) *q3Cache {
	c := &q3Cache{B: B, maxBlocks: ceilDiv(slices.Max(lens), B) + 1}
	numBlocks := 0
	for _, n := range lens {
		numBlocks += ceilDiv(n, B)
	}
	perm := r.Perm(numBlocks)
	c.bt = make([]int32, len(lens)*c.maxBlocks)
	for i := range c.bt {
		c.bt[i] = -1
	}
	next := 0
	for s, n := range lens {
		for b := range ceilDiv(n, B) {
			c.bt[s*c.maxBlocks+b] = int32(perm[next])
			next++
		}
	}
	nan := math.Float32frombits(0x7fc00000)
	elems := numBlocks * q3TestKVHeads * B * rotaryHeadDim
	c.k, c.v = make([]float32, elems), make([]float32, elems)
	for i := range c.k {
		c.k[i], c.v[i] = nan, nan
	}
	for s, n := range lens {
		for pos := range n {
			for kvh := range q3TestKVHeads {
				o := c.at(s, pos, kvh)
				for d := range rotaryHeadDim {
					c.k[o+d], c.v[o+d] = bf16Round(float32(r.NormFloat64())), bf16Round(float32(r.NormFloat64()))
				}
			}
		}
	}
	return c
}

func (c *q3Cache) at(s, pos, kvh int) int {
	return ((int(c.bt[s*c.maxBlocks+pos/c.B])*q3TestKVHeads+kvh)*c.B + pos%c.B) * rotaryHeadDim
}

// upload copies the cache and block tables to the GPU: k, v, bt, and the
// table stride as the one-int device array the kernels read.
func (c *q3Cache) upload(t *testing.T, g *gpu) (k, v, bt, stride devPtr) {
	return upload(t, g, toBF16(c.k)), upload(t, g, toBF16(c.v)), upload(t, g, c.bt), upload(t, g, []int32{int32(c.maxBlocks)})
}

// attend is the float64 attention of query q (one head of KV head kvh) over
// keys 0..n-1 of sequence s, appended to out, and each element's sum of
// |p v| (the scale of P's rounding error) appended to mag.
func (c *q3Cache) attend(out, mag []float64, q []float32, s, kvh, n int) ([]float64, []float64) {
	sc := make([]float64, n)
	mx := math.Inf(-1)
	for j := range n {
		k := c.k[c.at(s, j, kvh):]
		dot := 0.0
		for d := range rotaryHeadDim {
			dot += float64(q[d]) * float64(k[d])
		}
		sc[j] = dot / math.Sqrt(rotaryHeadDim)
		mx = math.Max(mx, sc[j])
	}
	sum := 0.0
	for j := range sc {
		sc[j] = math.Exp(sc[j] - mx)
		sum += sc[j]
	}
	for d := range rotaryHeadDim {
		acc, abs := 0.0, 0.0
		for j := range n {
			pv := sc[j] * float64(c.v[c.at(s, j, kvh)+d])
			acc += pv
			abs += math.Abs(pv)
		}
		out, mag = append(out, acc/sum), append(mag, abs/sum)
	}
	return out, mag
}

// randQKV is rows of random bf16 q|k|v for NH query heads (the kernels read
// the queries only; keys and values come from the cache).
func randQKV(r *rand.Rand, rows, NH int) []float32 {
	qkv := make([]float32, rows*(NH+2*q3TestKVHeads)*rotaryHeadDim)
	for i := range qkv {
		qkv[i] = bf16Round(float32(2 * r.NormFloat64())) // scores with a standard deviation of about 2
	}
	return qkv
}

// checkAttention compares a kernel's bf16 output with the float64 one:
// within the output's bf16 rounding (2^-9 relative, with room) plus 2^-8 of
// the sum of |p v|, for P rounded to bf16 on its way into the MMAs (the
// prefill kernel's; the decode kernel's hi and lo halves keep more).
func checkAttention(t *testing.T, raw []uint16, want, mag []float64, what func(i int) string) {
	t.Helper()
	worst := 0.0
	for i, w := range want {
		got := float64(bf16ToF32(raw[i]))
		err := math.Abs(got - w)
		worst = math.Max(worst, err)
		if !(err <= 1e-3+4e-3*math.Abs(w)+mag[i]/256) {
			t.Fatalf("%s: got %.5f, want %.5f", what(i), got, w)
		}
	}
	t.Logf("worst abs error %.2e", worst)
}

// runQ3AttnRows runs q3_attn_rows over rows of contexts ctxs (dec_runs:
// runs, or null) and checks every output against a float64 softmax.
func runQ3AttnRows(t *testing.T, g *gpu, r *rand.Rand, G, B, nsplit int, ctxs []int, runs []int32) {
	const NKV, HD = q3TestKVHeads, rotaryHeadDim
	NH, rows := G*NKV, len(ctxs)
	width := (NH + 2*NKV) * HD
	c := newQ3Cache(r, ctxs, B)
	qkv := randQKV(r, rows, NH)
	pos, seqs := make([]int32, rows), make([]int32, rows)
	var want, mag []float64
	for s, n := range ctxs {
		pos[s], seqs[s] = int32(n-1), int32(s)
		for h := range NH {
			want, mag = c.attend(want, mag, qkv[s*width+h*HD:], s, h/G, n)
		}
	}
	dK, dV, dBT, dStride := c.upload(t, g)
	seqsDev := upload(t, g, seqs)
	var runsDev devPtr
	if runs != nil {
		runsDev = upload(t, g, runs)
	}
	att := devBuf(t, g, 2*rows*NH*HD)
	part := devBuf(t, g, 4*rows*NH*nsplit*(HD+2))
	if err := g.launch(g.kernel("q3_attn_rows"), rows, NKV, nsplit, 128, 0, argPtr(att), argPtr(part), argPtr(upload(t, g, toBF16(qkv))),
		argPtr(dK), argPtr(dV), argPtr(upload(t, g, pos)), argPtr(seqsDev), argPtr(runsDev), argPtr(seqsDev), argPtr(dBT), argPtr(dStride), argInt(NH),
		argInt(NKV), argInt(B), argF32(float32(math.Log2E/math.Sqrt(HD))), argInt(nsplit)); err != nil {
		t.Fatal(err)
	}
	if nsplit > 1 {
		if err := g.launch(g.kernel("q3_attn_combine"), rows, NH, 1, HD, 0, argPtr(att), argPtr(part), argPtr(seqsDev),
			argPtr(seqsDev), argInt(NH), argInt(nsplit)); err != nil {
			t.Fatal(err)
		}
	}
	checkAttention(t, download[uint16](t, g, att, rows*NH*HD), want, mag, func(i int) string {
		return fmt.Sprintf("context %d head %d dim %d", ctxs[i/(NH*HD)], i/HD%NH, i%HD)
	})
}

func runQ3AttnPrefill(t *testing.T, g *gpu, kernel string, smem int, r *rand.Rand, G, B int, chunks [][2]int) {
	const NKV, HD = q3TestKVHeads, rotaryHeadDim
	NH := G * NKV
	width := (NH + 2*NKV) * HD
	var lens []int
	var qStart, qLen, ctx, tileSeq, tileQ0 []int32
	rows := 0
	for s, ch := range chunks {
		lens = append(lens, ch[0]+ch[1])
		qStart, qLen, ctx = append(qStart, int32(rows)), append(qLen, int32(ch[1])), append(ctx, int32(ch[0]))
		for q0 := 0; q0 < ch[1]; q0 += rotaryPrefillRows {
			tileSeq, tileQ0 = append(tileSeq, int32(s)), append(tileQ0, int32(q0))
		}
		rows += ch[1]
	}
	c := newQ3Cache(r, lens, B)
	qkv := randQKV(r, rows, NH)
	var want, mag []float64
	row := 0
	for s, ch := range chunks {
		for i := range ch[1] {
			for h := range NH {
				want, mag = c.attend(want, mag, qkv[(row+i)*width+h*HD:], s, h/G, ch[0]+i+1)
			}
		}
		row += ch[1]
	}
	dK, dV, dBT, dStride := c.upload(t, g)
	k := g.kernel(kernel)
	if err := g.setMaxDynamicSmem(k, smem); err != nil {
		t.Fatal(err)
	}
	out := devBuf(t, g, 2*rows*NH*HD)
	var maps wgMaps
	if kernel == q3AttnWGKernel {
		// The cache as rows of 128 dims, one a (block, KV head, slot).
		cacheRows := len(c.k) / HD
		var err error
		if maps, err = g.encodeTensorMaps([]tmaMatrix{{dK, cacheRows, HD, min(B, 64)}, {dV, cacheRows, HD, min(B, 64)}}); err != nil {
			t.Fatal(err)
		}
		defer maps.arena.free()
	}
	err := g.launchAttnPrefill(k, maps, len(tileSeq), NH, smem, out, upload(t, g, toBF16(qkv)), dK, dV,
		argPtr(upload(t, g, qStart)), argPtr(upload(t, g, qLen)), argPtr(upload(t, g, ctx)), argPtr(upload(t, g, tileSeq)),
		argPtr(upload(t, g, tileQ0)), argPtr(dBT), argPtr(dStride), argInt(NH), argInt(NKV), argInt(B),
		argF32(float32(math.Log2E/math.Sqrt(HD))))
	if err != nil {
		t.Fatal(err)
	}
	checkAttention(t, download[uint16](t, g, out, rows*NH*HD), want, mag, func(i int) string {
		return fmt.Sprintf("row %d head %d dim %d", i/(NH*HD), i/HD%NH, i%HD)
	})
}

func toBF16(x []float32) []uint16 {
	out := make([]uint16, len(x))
	for i, f := range x {
		out[i] = f32ToBF16(f)
	}
	return out
}

func bf16Round(f float32) float32 { return bf16ToF32(f32ToBF16(f)) }

func bf16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
