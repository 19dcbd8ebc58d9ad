package cuda

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"unsafe"

	"github.com/roseinfer/roseinfer/engine/sample"
)

// logitsIn is how sampleRowsGPU hands the sampler its logits.
type logitsIn int

const (
	logitsF32       logitsIn = iota // fp32 rows, no tile keys (gemv.cu's LM head)
	logitsF32Tiled                  // fp32 rows and their tile keys (lmhead.cu)
	logitsF16                       // fp16 rows (cuBLASLt's LM head, sample_rows_h): values must be fp16-exact
	logitsF32Large                  // fp32 rows through sample_rows_large (vocabularies up to 262,144 ids)
	logitsBF16Large                 // bf16 rows through sample_rows_large_bf (the rotary block's cuBLASLt LM head): values must be bf16-exact
)

func (in logitsIn) String() string {
	return [...]string{"fp32", "fp32 tiled", "fp16", "fp32 large", "bf16 large"}[in]
}

// roundBF16 rounds every value to the nearest bf16, as the sampler's bf16
// rows hold them.
func roundBF16(x []float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = bf16Round(v)
	}
	return out
}

// roundLogits is what the sampler reads of logits handed over as in.
func roundLogits(x []float32, in logitsIn) []float32 {
	switch in {
	case logitsF16:
		return roundF16(x)
	case logitsBF16Large:
		return roundBF16(x)
	}
	return x
}

// sampleRowsGPU runs sample_rows (sample_rows_h for logitsF16) over M rows
// of logits (row stride ld; ld = 0 makes every row read row 0) and returns
// the ids and logprobs. With logitsF32Tiled the sampler gets the rows' tile
// keys as lmhead.cu defines them, computed here on the host (hostTileKeys).
func sampleRowsGPU(t *testing.T, g *gpu, logits []float32, ld, V int, ps []sample.Params, index []int, banned []int32, wantLP bool, in logitsIn) ([]int32, []float32) {
	t.Helper()
	var refine []uint64
	if in == logitsBF16Large {
		refine = []uint64{argPtr(0), argPtr(0), argInt(0)} // no greedy refinement: the argmax as read
	}
	return sampleRowsWith(t, g, logits, ld, V, ps, index, banned, wantLP, in, refine)
}

// sampleRowsWith is sampleRowsGPU with extra trailing kernel arguments
// (sample_rows_large_bf's h, w and C).
func sampleRowsWith(t *testing.T, g *gpu, logits []float32, ld, V int, ps []sample.Params, index []int, banned []int32, wantLP bool, in logitsIn, extra []uint64) ([]int32, []float32) {
	t.Helper()
	M := len(ps)
	temp, topP := make([]float32, M), make([]float32, M)
	topK, seedLo, seedHi, idx, want := make([]int32, M), make([]uint32, M), make([]uint32, M), make([]int32, M), make([]int32, M)
	for i, p := range ps {
		temp[i], topK[i], topP[i] = p.Temperature, int32(p.TopK), p.TopP
		seedLo[i], seedHi[i], idx[i] = uint32(p.Seed), uint32(p.Seed>>32), int32(index[i])
		if wantLP {
			want[i] = 1
		}
	}
	outTok := devBuf(t, g, 4*M)
	hostPtr, hostOut, err := g.drv.hostAllocMapped(8 * M)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.drv.hostFree(hostPtr) })
	kernel, rows, keys, smem := g.kernel("sample_rows"), devPtr(0), devPtr(0), 0
	if in == logitsF32Large || in == logitsBF16Large {
		kernel, smem = g.kernel("sample_rows_large"), sampleLargeSmem
		if in == logitsBF16Large {
			kernel = g.kernel("sample_rows_large_bf")
		}
		if err := g.setMaxDynamicSmem(kernel, smem); err != nil {
			t.Fatal(err)
		}
	}
	if h := roundLogits(logits, in); !slices.EqualFunc(h, logits, func(a, b float32) bool { return a == b || a != a && b != b }) {
		t.Fatalf("sampleRowsGPU: %v logits must be exact in that type (roundLogits)", in)
	}
	switch in {
	case logitsF16:
		kernel, rows = g.kernel("sample_rows_h"), upload(t, g, toF16(logits))
	case logitsBF16Large:
		rows = upload(t, g, toBF16(logits))
	default:
		rows = upload(t, g, logits)
	}
	if in == logitsF32Tiled {
		nrows, n := M, ld
		if ld == 0 {
			nrows, n = 1, len(logits)
		}
		keys = upload(t, g, hostTileKeys(logits, nrows, n))
	}
	args := []uint64{argPtr(outTok), argPtr(rows),
		argInt(ld), argInt(V), argPtr(upload(t, g, temp)), argPtr(upload(t, g, topK)), argPtr(upload(t, g, topP)),
		argPtr(upload(t, g, seedLo)), argPtr(upload(t, g, seedHi)), argPtr(upload(t, g, idx)), argPtr(upload(t, g, banned)),
		argPtr(upload(t, g, want)), argPtr(keys), argPtr(upload(t, g, []uint64{uint64(hostOut)}))}
	args = append(args, extra...)
	if err := g.launch(kernel, M, 1, 1, 1024, smem, args...); err != nil {
		t.Fatal(err)
	}
	devTok := download[int32](t, g, outTok, M) // synchronises: the pairs are in
	pairs := unsafe.Slice((*int32)(hostPtr), 2*M)
	tok, lp := make([]int32, M), make([]float32, M)
	for i := range tok {
		tok[i], lp[i] = pairs[2*i], math.Float32frombits(uint32(pairs[2*i+1]))
		if tok[i] != devTok[i] {
			t.Fatalf("row %d: mapped host memory has id %d, the device copy %d", i, tok[i], devTok[i])
		}
	}
	return tok, lp
}

// TestSamplerMatchesCPU: on random rows and settings the GPU draws exactly
// the token engine/sample's reference draws with the same seed and index.
// The keepAll cases give every row top_k off and top_p 1 (every id a
// candidate: draw_all's path where the vocabulary exceeds COMPACT_MAX).
func TestSamplerMatchesCPU(t *testing.T) {
	g := testGPU(t)
	r := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct {
		V       int
		padded  bool     // rows 16-byte aligned with NaN padding (the device's layout) instead of packed
		in      logitsIn // tile keys need the padded layout
		keepAll bool
	}{{50257, false, logitsF32, false}, {50257, true, logitsF32, false}, {50257, true, logitsF32Tiled, false},
		{50257, true, logitsF16, false}, {50257, false, logitsF16, false}, {1000, false, logitsF32, false},
		{1000, true, logitsF32Tiled, false}, {1000, true, logitsF16, false}, {3, false, logitsF32, false},
		{3, true, logitsF32, false}, {3, true, logitsF32Tiled, false}, {3, false, logitsF16, false},
		{151936, true, logitsF32Large, false}, {1000, false, logitsF32Large, false}, {3, false, logitsF32Large, false},
		{151936, true, logitsF32Large, true}, {50257, true, logitsF16, true}, {50257, false, logitsF32, true},
		{1025, false, logitsF32Large, true}, {151936, true, logitsBF16Large, false}, {151936, true, logitsBF16Large, true},
		{1000, false, logitsBF16Large, false}, {3, false, logitsBF16Large, false}} {
		V := tc.V
		const M = 160
		logits := make([]float32, M*V)
		ps := make([]sample.Params, M)
		index := make([]int, M)
		banned := make([]int32, M)
		for i := 0; i < M; i++ {
			scale := []float32{0.5, 3, 10}[i%3]
			copy(logits[i*V:], randn(r, V, scale))
			switch i % 7 {
			case 0: // ties and -inf in the row
				for j := 0; j < V; j += 5 {
					logits[i*V+j] = logits[i*V]
				}
				logits[i*V+1] = float32(math.Inf(-1))
			case 3: // a few distinct values: ties at the top-k cut, resolved by id
				for j := 0; j < V; j++ {
					logits[i*V+j] = float32(math.Round(float64(logits[i*V+j])))
				}
			case 5: // -0 and +0 compare equal
				for j := 0; j < V; j += 2 {
					logits[i*V+j] = float32(math.Copysign(0, -1))
				}
			}
			ps[i] = sample.Params{
				Temperature: []float32{0, 0.7, 1, 1.5}[i%4],
				TopK:        []int{0, 1, 50, 2000, -1, 5, 1024, 200}[r.IntN(8)],
				TopP:        []float32{1, 0.9, 0.5, 0.99}[(i/4)%4],
				Seed:        r.Uint64(),
			}
			if tc.keepAll {
				ps[i].TopK, ps[i].TopP = []int{0, -1, V}[i%3], 1
			}
			index[i] = r.IntN(1000)
			banned[i] = -1
			if i%3 == 1 {
				banned[i] = int32(r.IntN(V))
			}
		}
		logits = roundLogits(logits, tc.in) // the CPU reference sees the values the GPU reads
		ld, dev := V, logits
		if tc.padded {
			ld = (V + 127) &^ 127
			dev = make([]float32, M*ld)
			for i := range dev {
				dev[i] = float32(math.NaN())
			}
			for i := 0; i < M; i++ {
				copy(dev[i*ld:], logits[i*V:(i+1)*V])
			}
		}
		got, lp := sampleRowsGPU(t, g, dev, ld, V, ps, index, banned, true, tc.in)
		cpu := sample.NewSampler(V)
		mismatches := 0
		for i := 0; i < M; i++ {
			row := logits[i*V : (i+1)*V]
			want := cpu.Sample(row, ps[i], index[i], banned[i])
			if got[i] != want {
				mismatches++
				t.Errorf("V=%d padded=%v %v keepAll=%v row %d %+v index %d banned %d: GPU %d, CPU %d", V, tc.padded, tc.in, tc.keepAll, i, ps[i], index[i], banned[i], got[i], want)
			}
			if got[i] >= 0 && int(got[i]) < V {
				if wlp := sample.LogProb(row, got[i]); math.Abs(float64(lp[i]-wlp)) > 1e-4*math.Max(1, math.Abs(float64(wlp))) {
					t.Errorf("V=%d row %d: logprob %v, CPU %v", V, i, lp[i], wlp)
				}
			}
		}
		if mismatches > 0 {
			t.Logf("V=%d padded=%v %v: %d of %d rows differ", V, tc.padded, tc.in, mismatches, M)
		}
	}
}

// TestSamplerGreedyRefine: greedy rows over bf16 logits take the fp32
// argmax of the LM head's operands (dot_refine), not the bf16 one. Each row
// r gets a crafted pair of ids, 2r and 2r + 1, at the top of its logits and
// 0.002-0.03 apart (a bf16 unit at their magnitude is 0.0625), so that
// rounding to bf16 ties or swaps them; the sampler must return the id the
// float64 dot products rank first. The same rows without the operands (h
// null) return the bf16 argmax, which must differ somewhere, or the test
// could not tell refinement from none.
func TestSamplerGreedyRefine(t *testing.T) {
	g := testGPU(t)
	r := rand.New(rand.NewPCG(61, 62))
	const M, C, V = 64, 256, 20000
	h, w := roundBF16(randn(r, M*C, 1)), roundBF16(randn(r, V*C, 0.05))
	for row := 0; row < M; row++ {
		hr := h[row*C : (row+1)*C]
		norm2, k := 0.0, 0
		for j, v := range hr {
			norm2 += float64(v) * float64(v)
			if math.Abs(float64(v)) > math.Abs(float64(hr[k])) {
				k = j
			}
		}
		a, b := w[2*row*C:(2*row+1)*C], w[(2*row+1)*C:(2*row+2)*C]
		for j := range a { // logit about 10 for this row, well above the others
			a[j] = bf16Round(float32(10 / norm2 * float64(hr[j])))
		}
		copy(b, a)
		delta := (0.002 + 0.028*r.Float64()) * float64([]int{1, -1}[row%2])
		b[k] = bf16Round(a[k] + float32(delta/float64(hr[k])))
	}
	exact := make([]float64, M*V)
	logits := make([]float32, M*V)
	for row := 0; row < M; row++ {
		for id := 0; id < V; id++ {
			s := 0.0
			for j := 0; j < C; j++ {
				s += float64(h[row*C+j]) * float64(w[id*C+j])
			}
			exact[row*V+id], logits[row*V+id] = s, bf16Round(float32(s))
		}
	}
	ps, index, banned := make([]sample.Params, M), make([]int, M), make([]int32, M)
	for i := range ps {
		ps[i], banned[i] = sample.Params{Temperature: 0, TopK: []int{0, 1}[i%2], TopP: 1, Seed: uint64(i)}, -1
		if i%2 == 1 {
			ps[i].Temperature = 0.8 // top_k 1 is greedy too
		}
	}
	refined, _ := sampleRowsRefined(t, g, logits, V, ps, index, banned, upload(t, g, toBF16(h)), upload(t, g, toBF16(w)), C)
	plain, _ := sampleRowsGPU(t, g, logits, V, V, ps, index, banned, false, logitsBF16Large)
	differ := 0
	for row := 0; row < M; row++ {
		best := 0
		for id, v := range exact[row*V : (row+1)*V] {
			if v > exact[row*V+best] {
				best = id
			}
		}
		if best != 2*row && best != 2*row+1 {
			t.Fatalf("row %d: the crafted pair is not the top (argmax %d)", row, best)
		}
		if int(refined[row]) != best {
			t.Errorf("row %d: refined greedy token %d, the float64 argmax %d (logits %.5f, %.5f)", row, refined[row], best,
				exact[row*V+2*row], exact[row*V+2*row+1])
		}
		if want := argmaxF32(logits[row*V : (row+1)*V]); plain[row] != want {
			t.Errorf("row %d: unrefined greedy token %d, the bf16 argmax %d", row, plain[row], want)
		}
		if plain[row] != refined[row] {
			differ++
		}
	}
	t.Logf("%d of %d rows: the bf16 argmax is not the fp32 one", differ, M)
	if differ == 0 {
		t.Error("no row's bf16 argmax differs from its fp32 one: the test does not exercise the refinement")
	}
}

// sampleRowsRefined runs sample_rows_large_bf over bf16-exact logits (M, V)
// with the LM head's operands h (M, C) and w (V, C) on the device.
func sampleRowsRefined(t *testing.T, g *gpu, logits []float32, V int, ps []sample.Params, index []int, banned []int32, h, w devPtr, C int) ([]int32, []float32) {
	t.Helper()
	return sampleRowsWith(t, g, logits, V, V, ps, index, banned, false, logitsBF16Large, []uint64{argPtr(h), argPtr(w), argInt(C)})
}

// TestSamplerDistribution draws 40,000 tokens from one row with top-k and
// top-p and checks the histogram against the probabilities the CPU rule
// assigns (chi-square, p = 0.001).
func TestSamplerDistribution(t *testing.T) {
	g := testGPU(t)
	r := rand.New(rand.NewPCG(9, 10))
	const V, M = 50257, 40000
	row := randn(r, V, 2.5)
	p := sample.Params{Temperature: 0.8, TopK: 40, TopP: 0.9, Seed: 12345}
	ps, index, banned := make([]sample.Params, M), make([]int, M), make([]int32, M)
	for i := range ps {
		ps[i], index[i], banned[i] = p, i, -1
	}
	for _, in := range []logitsIn{logitsF32, logitsF32Tiled, logitsF16} {
		ld := 0
		ref := row
		if in == logitsF16 {
			ref = roundF16(row)
		}
		dev := ref
		if in == logitsF32Tiled { // the tiled path needs 8-aligned rows: pad with NaN
			dev = make([]float32, (V+127)&^127)
			for i := range dev {
				dev[i] = float32(math.NaN())
			}
			copy(dev, row)
		}
		got, _ := sampleRowsGPU(t, g, dev, ld, V, ps, index, banned, false, in)
		checkDistribution(t, ref, p, got, in)
	}
}

// TestSamplerDistributionLarge is TestSamplerDistribution at Qwen3's
// 151,936 ids through sample_rows_large and sample_rows_large_bf: top-k 40
// (the fast path), top-k 2,000 (past the fast path's 1,024 candidates: the
// radix search and the bitmaps sized for 262,144 ids) and top_k off with
// top_p 1 (draw_all, the sampling of nano-vllm's protocol).
func TestSamplerDistributionLarge(t *testing.T) {
	g := testGPU(t)
	r := rand.New(rand.NewPCG(19, 20))
	const V, M = 151936, 40000
	row := randn(r, V, 2.5)
	for _, p := range []sample.Params{{Temperature: 0.8, TopK: 40, TopP: 0.9, Seed: 12345}, {Temperature: 1.5, TopK: 2000, TopP: 0.95, Seed: 777},
		{Temperature: 0.6, TopP: 1, Seed: 4242}} {
		ps, index, banned := make([]sample.Params, M), make([]int, M), make([]int32, M)
		for i := range ps {
			ps[i], index[i], banned[i] = p, i, -1
		}
		for _, in := range []logitsIn{logitsF32Large, logitsBF16Large} {
			ref := roundLogits(row, in)
			got, _ := sampleRowsGPU(t, g, ref, 0, V, ps, index, banned, false, in)
			checkDistribution(t, ref, p, got, in)
		}
	}
}

// checkDistribution compares draws from one row with the probabilities the
// CPU rule assigns (chi-square, p = 0.001).
func checkDistribution(t *testing.T, row []float32, p sample.Params, got []int32, in logitsIn) {
	t.Helper()
	ids, probs := ruleProbabilities(row, p)
	chi2, crit, bins, outside := chiSquare(ids, probs, got)
	if len(outside) > 0 {
		t.Fatalf("%v: drew tokens outside the top-k/top-p set: %v", in, outside)
	}
	t.Logf("%v: kept %d tokens in %d bins, chi2 = %.1f, critical %.1f", in, len(ids), bins, chi2, crit)
	if chi2 > crit {
		t.Errorf("%v: chi-square %.1f > %.1f: draws do not follow the reference distribution", in, chi2, crit)
	}
}

// ruleProbabilities is engine/sample's rules 2-4 (sampler.go) for one row:
// the ids it can draw, most probable first (ties to the lower id), and the
// probability of each.
func ruleProbabilities(row []float32, p sample.Params) ([]int, []float64) {
	ids := make([]int, len(row))
	for i := range ids {
		ids[i] = i
	}
	sort.Slice(ids, func(a, b int) bool {
		return row[ids[a]] > row[ids[b]] || (row[ids[a]] == row[ids[b]] && ids[a] < ids[b])
	})
	if p.TopK > 0 && p.TopK < len(ids) {
		ids = ids[:p.TopK]
	}
	m := float64(row[ids[0]])
	w := make([]float64, len(ids))
	z := 0.0
	for i, id := range ids {
		w[i] = math.Exp((float64(row[id]) - m) / float64(p.Temperature))
		z += w[i]
	}
	kept, acc := 0, 0.0
	for kept < len(ids) && (p.TopP >= 1 || acc < float64(p.TopP)*z) {
		acc += w[kept]
		kept++
	}
	for i := range w[:kept] {
		w[i] /= acc
	}
	return ids[:kept], w[:kept]
}

// chiSquare tests draws against probs (of ids, most probable first): the
// ids go into bins of consecutive ids with at least 5 expected draws each
// (a smaller last bin joins the one before), so that rows of many unlikely
// ids (top_k off over 151,936) still give a valid test. It returns the
// statistic, its critical value at p = 0.001 (Wilson-Hilferty) and the
// bins' count, and the draws of ids outside ids.
func chiSquare(ids []int, probs []float64, got []int32) (chi2, crit float64, bins int, outside map[int32]int) {
	const minExpected = 5
	M := float64(len(got))
	bin := make(map[int32]int, len(ids))
	var expected []float64
	open := 0.0
	for i, id := range ids {
		bin[int32(id)] = len(expected)
		open += probs[i] * M
		if open >= minExpected {
			expected, open = append(expected, open), 0
		}
	}
	if open > 0 { // the last ids' bin: its own if it is the only one, else the one before
		if len(expected) == 0 {
			expected = append(expected, open)
		} else {
			expected[len(expected)-1] += open
			for id, b := range bin {
				bin[id] = min(b, len(expected)-1)
			}
		}
	}
	observed := make([]float64, len(expected))
	outside = map[int32]int{}
	for _, tok := range got {
		if b, ok := bin[tok]; ok {
			observed[b]++
		} else {
			outside[tok]++
		}
	}
	for b, e := range expected {
		chi2 += (observed[b] - e) * (observed[b] - e) / e
	}
	df := float64(max(len(expected)-1, 1))
	crit = df * math.Pow(1-2/(9*df)+3.09*math.Sqrt(2/(9*df)), 3)
	return chi2, crit, len(expected), outside
}

// TestChiSquareOnCPUDraws holds the GPU distribution tests' check to the
// CPU sampler (no GPU needed): draws of engine/sample's rule pass it, with
// top-k and top-p and with every id a candidate, and draws at another
// temperature or from a shifted row fail it.
func TestChiSquareOnCPUDraws(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 30))
	const V, M = 8000, 4000
	row := randn(r, V, 2.5)
	cpu := sample.NewSampler(V)
	draw := func(row []float32, p sample.Params) []int32 {
		got := make([]int32, M)
		for i := range got {
			got[i] = cpu.Sample(row, p, i, -1)
		}
		return got
	}
	for _, p := range []sample.Params{{Temperature: 0.8, TopK: 40, TopP: 0.9, Seed: 1}, {Temperature: 0.6, TopP: 1, Seed: 2},
		{Temperature: 1.5, TopK: 2000, TopP: 0.95, Seed: 3}} {
		ids, probs := ruleProbabilities(row, p)
		chi2, crit, bins, outside := chiSquare(ids, probs, draw(row, p))
		t.Logf("%+v: the reference's draws chi2 %.1f, critical %.1f (%d bins)", p, chi2, crit, bins)
		if chi2 > crit || len(outside) > 0 {
			t.Errorf("%+v: the reference's own draws fail: chi2 %.1f > %.1f (%d bins), %d outside", p, chi2, crit, bins, len(outside))
		}
		hot := p
		hot.Temperature *= 1.25
		if chi2, crit, _, _ := chiSquare(ids, probs, draw(row, hot)); chi2 <= crit {
			t.Errorf("%+v: draws at temperature %.2f pass: chi2 %.1f <= %.1f", p, hot.Temperature, chi2, crit)
		}
	}
	// Every id a candidate: draws from a row whose 100 most likely ids moved
	// down by 0.3 must fail too.
	p := sample.Params{Temperature: 0.6, TopP: 1, Seed: 4}
	ids, probs := ruleProbabilities(row, p)
	shifted := slices.Clone(row)
	for _, id := range ids[:100] {
		shifted[id] -= 0.3
	}
	if chi2, crit, _, _ := chiSquare(ids, probs, draw(shifted, p)); chi2 <= crit {
		t.Errorf("top_k off: draws from a shifted row pass: chi2 %.1f <= %.1f", chi2, crit)
	}
}

// hostTileKeys is lmhead.cu's tile-key output for rows x ld logits, computed
// on the host: the largest float_key of each 8-column tile (NaN as -inf,
// -0 as +0).
func hostTileKeys(logits []float32, rows, ld int) []uint32 {
	kld := ld / lmheadTileCols
	keys := make([]uint32, rows*kld)
	for r := 0; r < rows; r++ {
		for t := 0; t < kld; t++ {
			var k uint32
			for _, v := range logits[r*ld+t*lmheadTileCols : r*ld+(t+1)*lmheadTileCols] {
				k = max(k, floatKey(v))
			}
			keys[r*kld+t] = k
		}
	}
	return keys
}

// floatKey is common.cuh's float_key(finite_or_neginf(v)).
func floatKey(v float32) uint32 {
	if v != v {
		v = float32(math.Inf(-1))
	}
	b := math.Float32bits(v)
	if b == 0x80000000 {
		b = 0
	}
	if b&0x80000000 != 0 {
		return ^b
	}
	return b | 0x80000000
}
