package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func randn(r *rand.Rand, n int, std float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64()) * std
	}
	return x
}

func TestLayerNormKernel(t *testing.T) {
	g := testGPU(t)
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct{ R, C int }{{1, 64}, {37, 768}, {300, 100}} {
		x := randn(r, tc.R*tc.C, 2)
		for i := range x {
			x[i] += 0.5 // a mean to subtract
		}
		w, b := randn(r, tc.C, 1), randn(r, tc.C, 0.1)
		rows := []int32{}
		for i := tc.R - 1; i >= 0; i -= 2 {
			rows = append(rows, int32(i))
		}
		dx, dw, db, drows := upload(t, g, x), upload(t, g, w), upload(t, g, b), upload(t, g, rows)
		for _, sel := range []bool{false, true} {
			R, rp := tc.R, devPtr(0)
			if sel {
				R, rp = len(rows), drows
			}
			out := devBuf(t, g, 2*R*tc.C)
			if err := g.launch(g.kernel("layernorm_forward"), ceilDiv(R, 4), 1, 1, 128, 0,
				argPtr(out), argPtr(dx), argPtr(rp), argPtr(dw), argPtr(db), argInt(R), argInt(tc.C), argF32(1e-5)); err != nil {
				t.Fatal(err)
			}
			got := fromF16(download[uint16](t, g, out, R*tc.C))
			want := make([]float32, R*tc.C)
			for i := 0; i < R; i++ {
				row := i
				if sel {
					row = int(rows[i])
				}
				refLayerNorm(want[i*tc.C:(i+1)*tc.C], x[row*tc.C:(row+1)*tc.C], w, b, 1e-5)
			}
			if hasNaN(got) {
				t.Fatalf("R=%d C=%d sel=%v: unwritten output", R, tc.C, sel)
			}
			if e := relErr(got, want); e > 2e-3 {
				t.Errorf("R=%d C=%d sel=%v: rel err %.2e", R, tc.C, sel, e)
			}
		}
	}
}

func TestEncoderKernel(t *testing.T) {
	g := testGPU(t)
	r := rand.New(rand.NewPCG(3, 4))
	V, maxT, C, N := 1000, 64, 96, 50
	wte, wpe := roundF16(randn(r, V*C, 1)), roundF16(randn(r, maxT*C, 1))
	tokens, pos, srcRows := make([]int32, N), make([]int32, N), make([]int32, N)
	prevOut := make([]int32, 7) // the previous step's samples
	for i := range prevOut {
		prevOut[i] = int32(r.IntN(V))
	}
	embedded := make([]int32, N) // the token each row embeds
	for i := range tokens {
		tokens[i], pos[i], srcRows[i] = int32(r.IntN(V)), int32(r.IntN(maxT)), -1
		embedded[i] = tokens[i]
		if i%3 == 0 { // takes its token from the previous step's output
			srcRows[i] = int32(r.IntN(len(prevOut)))
			tokens[i] = -1
			embedded[i] = prevOut[srcRows[i]]
		}
	}
	out := devBuf(t, g, 4*N*C)
	// The words to clear outnumber the threads, so each thread clears
	// several; the one past them must keep its value.
	nzero := 3*N*C + 5
	poison := make([]uint32, nzero+1)
	for i := range poison {
		poison[i] = 0xdeadbeef
	}
	zero := upload(t, g, poison)
	if err := g.launch(g.kernel("encoder_forward"), ceilDiv(N*C, 256), 1, 1, 256, 0, argPtr(out), argPtr(upload(t, g, tokens)),
		argPtr(upload(t, g, prevOut)), argPtr(upload(t, g, srcRows)), argPtr(upload(t, g, pos)), argPtr(upload(t, g, toF16(wte))),
		argPtr(upload(t, g, toF16(wpe))), argInt(N), argInt(C), argPtr(zero), argInt(nzero)); err != nil {
		t.Fatal(err)
	}
	cleared := download[uint32](t, g, zero, nzero+1)
	for i, v := range cleared {
		want := uint32(0)
		if i == nzero {
			want = 0xdeadbeef
		}
		if v != want {
			t.Fatalf("zero[%d] = %#x, want %#x (nzero %d)", i, v, want, nzero)
		}
	}
	got := download[float32](t, g, out, N*C)
	for i := 0; i < N; i++ {
		for c := 0; c < C; c++ {
			want := wte[int(embedded[i])*C+c] + wpe[int(pos[i])*C+c]
			if got[i*C+c] != want {
				t.Fatalf("row %d col %d: got %v want %v", i, c, got[i*C+c], want)
			}
		}
	}
}

func TestAttentionKernels(t *testing.T) {
	testGPU(t)
	r := rand.New(rand.NewPCG(5, 6))
	for _, tc := range []struct {
		NH, HD, B int
		ctx, qlen []int
	}{
		{2, 64, 16, []int{0, 5, 17, 100, 31, 0}, []int{7, 1, 1, 1, 40, 1}},
		{12, 64, 16, []int{300, 299, 64, 0}, []int{1, 1, 130, 257}},
		{5, 64, 7, []int{40, 0, 100, 3, 33}, []int{1, 1, 1, 20, 1}},
		{3, 32, 5, []int{9, 0, 13}, []int{1, 23, 1}},
		{2, 128, 7, []int{20, 3}, []int{1, 9}},
		{12, 64, 16, []int{880, 300, 17, 0, 45}, []int{7, 1, 16, 3, 20}}, // short chunks over long cached prefixes
	} {
		variants := []string{fmt.Sprintf("attention_prefill_%d", tc.HD)}
		decoders := []string{fmt.Sprintf("attention_decode_%d", tc.HD)}
		if tc.HD == 64 {
			variants = append(variants, "attention_prefill_mma_64")
			decoders = append(decoders, "attention_decode_warp_64", "attention_decode_warp_splits_r4_64")
		}
		for i, prefill := range variants {
			for _, decode := range decoders {
				for _, nsplit := range []int{1, 2, 4, 5, 8, 16} { // also split decode (flash-decoding) with its combine
					// The 80-register kernel runs 2, 4 or 8 splits, the
					// others 1, 5 or 16 here.
					if (decode == "attention_decode_warp_splits_r4_64") != (nsplit == 2 || nsplit == 4 || nsplit == 8) || nsplit == 16 && i > 0 {
						continue
					}
					// chunkRows: chunks of <= maxChunkRowsTest tokens run as
					// one-token decode rows (Options.ChunkRows).
					for _, chunkRows := range []bool{false, true} {
						if chunkRows && i > 0 {
							continue
						}
						t.Run(fmt.Sprintf("NH%d_HD%d_B%d_%s_%s_split%d_rows%v", tc.NH, tc.HD, tc.B, prefill, decode, nsplit, chunkRows), func(t *testing.T) {
							g := testGPU(t) // a subtest runs on its own goroutine: lock and bind again
							runAttentionCase(t, g, r, tc.NH, tc.HD, tc.B, tc.ctx, tc.qlen, prefill, decode, nsplit, chunkRows)
						})
					}
				}
			}
		}
	}
}

// maxChunkRowsTest: with chunkRows, chunks of at most this many tokens are
// attended as one-token decode rows.
const maxChunkRowsTest = 20

func runAttentionCase(t *testing.T, g *gpu, r *rand.Rand, NH, HD, B int, ctx, qlen []int, prefill, decode string, nsplit int, chunkRows bool) {
	tileRows := prefillTileRows
	if strings.Contains(prefill, "mma") {
		tileRows = prefillTileRowsMMA
	}
	C, S := NH*HD, len(ctx)
	maxBlocks := 0
	for i := range ctx {
		maxBlocks = max(maxBlocks, ceilDiv(ctx[i]+qlen[i], B))
	}
	numBlocks := S*maxBlocks + 3
	perm := r.Perm(numBlocks)
	bt := make([]int32, S*maxBlocks)
	for i := range bt {
		bt[i] = int32(perm[i])
	}
	kvElems := numBlocks * NH * B * HD
	kc, vc := roundF16(randn(r, kvElems, 1)), roundF16(randn(r, kvElems, 1))
	N := 0
	for _, q := range qlen {
		N += q
	}
	qkv := roundF16(randn(r, N*3*C, 1))
	qStart, slots := make([]int32, S), make([]int32, N)
	var tileSeq, tileQ0 []int32
	// The decode kernels' entries: a one-token sequence, or one row of a
	// chunk run as rows (its own position, the chunk's first as new_from).
	var decQS, decCtx, decFrom, decBT []int32
	row := 0
	for s := 0; s < S; s++ {
		qStart[s] = int32(row)
		asRows := qlen[s] == 1 || (chunkRows && qlen[s] <= maxChunkRowsTest)
		for i := 0; i < qlen[s]; i++ {
			pos := ctx[s] + i
			slots[row+i] = -1
			if !asRows {
				slots[row+i] = bt[s*maxBlocks+pos/B]*int32(B) + int32(pos%B)
			} else {
				decQS, decCtx, decFrom = append(decQS, int32(row+i)), append(decCtx, int32(pos)), append(decFrom, int32(ctx[s]))
				decBT = append(decBT, bt[s*maxBlocks:(s+1)*maxBlocks]...)
			}
		}
		if !asRows {
			for q0 := 0; q0 < qlen[s]; q0 += tileRows {
				tileSeq, tileQ0 = append(tileSeq, int32(s)), append(tileQ0, int32(q0))
			}
		}
		row += qlen[s]
	}
	ctx32, qlen32 := make([]int32, S), make([]int32, S)
	for i := range ctx {
		ctx32[i], qlen32[i] = int32(ctx[i]), int32(qlen[i])
	}
	dK, dV, dQKV := upload(t, g, toF16(kc)), upload(t, g, toF16(vc)), upload(t, g, toF16(qkv))
	dBT, dQS, dQL, dCtx := upload(t, g, bt), upload(t, g, qStart), upload(t, g, qlen32), upload(t, g, ctx32)
	out := devBuf(t, g, 2*N*C)
	scale := float32(1 / math.Sqrt(float64(HD)))
	if err := g.launch(g.kernel("kv_write"), ceilDiv(N*C/8, 256), 1, 1, 256, 0, argPtr(dK), argPtr(dV), argPtr(dQKV),
		argPtr(upload(t, g, slots)), argInt(N), argInt(NH), argInt(HD), argInt(B)); err != nil {
		t.Fatal(err)
	}
	if nd := len(decQS); nd > 0 {
		dec := make([]int32, nd)
		for i := range dec {
			dec[i] = int32(i)
		}
		dDec := upload(t, g, dec)
		dDecBT, dDecQS, dDecCtx, dDecFrom := upload(t, g, decBT), upload(t, g, decQS), upload(t, g, decCtx), upload(t, g, decFrom)
		part := devBuf(t, g, 4*len(dec)*NH*nsplit*(HD+2))
		warp := strings.Contains(decode, "warp")
		shape := decodeShape(warp, NH, nsplit)
		if shape.splitsKernel && decode != "attention_decode_warp_splits_r4_64" {
			decode = "attention_decode_warp_splits_64"
		}
		if err := g.launch(g.kernel(decode), len(dec), shape.gridY, shape.gridZ, shape.threads, shape.smem, argPtr(out), argPtr(dQKV),
			argPtr(dK), argPtr(dV), argPtr(dDecBT), argInt(maxBlocks), argPtr(dDecQS), argPtr(dDecCtx), argPtr(dDecFrom), argPtr(dDec),
			argInt(NH), argInt(B), argF32(scale), argInt(nsplit), argPtr(part)); err != nil {
			t.Fatal(err)
		}
		if nsplit > 1 && !warp { // the warp kernel merges its own splits
			if err := g.launch(g.kernel("attention_decode_combine"), len(dec), NH, 1, ceilDiv(HD, 32)*32, 0, argPtr(out), argPtr(part),
				argPtr(dDecQS), argPtr(dDec), argInt(NH), argInt(HD), argInt(nsplit)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(tileSeq) > 0 {
		if err := g.launch(g.kernel(prefill), len(tileSeq), NH, 1, 128, 0, argPtr(out),
			argPtr(dQKV), argPtr(dK), argPtr(dV), argPtr(dBT), argInt(maxBlocks), argPtr(dQS), argPtr(dQL), argPtr(dCtx),
			argPtr(upload(t, g, tileSeq)), argPtr(upload(t, g, tileQ0)), argInt(NH), argInt(B), argF32(scale)); err != nil {
			t.Fatal(err)
		}
	}
	got := fromF16(download[uint16](t, g, out, N*C))
	gotK := fromF16(download[uint16](t, g, dK, kvElems))
	gotV := fromF16(download[uint16](t, g, dV, kvElems))
	if hasNaN(got) {
		t.Fatal("attention left output rows unwritten (NaN poison)")
	}
	kvAt := func(cache []float32, s, pos, h int) []float32 {
		blk := int(bt[s*maxBlocks+pos/B])
		o := ((blk*NH+h)*B + pos%B) * HD
		return cache[o : o+HD]
	}
	want := make([]float32, N*C)
	for s := 0; s < S; s++ {
		for i := 0; i < qlen[s]; i++ {
			trow := int(qStart[s]) + i
			qpos := ctx[s] + i
			for h := 0; h < NH; h++ {
				// the new token's K/V must be in the cache now, bit for bit
				for d := 0; d < HD; d++ {
					if kvAt(gotK, s, qpos, h)[d] != qkv[trow*3*C+C+h*HD+d] || kvAt(gotV, s, qpos, h)[d] != qkv[trow*3*C+2*C+h*HD+d] {
						t.Fatalf("seq %d pos %d head %d: K/V not written to its cache slot", s, qpos, h)
					}
				}
				q := qkv[trow*3*C+h*HD : trow*3*C+(h+1)*HD]
				sc := make([]float64, qpos+1)
				mx := math.Inf(-1)
				for j := 0; j <= qpos; j++ {
					k := kvAt(kc, s, j, h)
					if j >= ctx[s] {
						r := int(qStart[s]) + j - ctx[s]
						k = qkv[r*3*C+C+h*HD : r*3*C+C+(h+1)*HD]
					}
					dot := 0.0
					for d := range k {
						dot += float64(q[d]) * float64(k[d])
					}
					sc[j] = dot * float64(scale)
					mx = math.Max(mx, sc[j])
				}
				sum := 0.0
				for j := range sc {
					sc[j] = math.Exp(sc[j] - mx)
					sum += sc[j]
				}
				for d := 0; d < HD; d++ {
					o := 0.0
					for j := 0; j <= qpos; j++ {
						v := kvAt(vc, s, j, h)
						if j >= ctx[s] {
							r := int(qStart[s]) + j - ctx[s]
							v = qkv[r*3*C+2*C+h*HD : r*3*C+2*C+(h+1)*HD]
						}
						o += sc[j] * float64(v[d])
					}
					want[trow*C+h*HD+d] = float32(o / sum)
				}
			}
		}
	}
	for s := 0; s < S; s++ {
		lo, hi := int(qStart[s])*C, (int(qStart[s])+qlen[s])*C
		if e := relErr(got[lo:hi], want[lo:hi]); e > 5e-3 {
			t.Errorf("seq %d (ctx %d, qlen %d): rel err %.2e", s, ctx[s], qlen[s], e)
		}
	}
}
