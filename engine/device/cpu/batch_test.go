package cpu

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/engine/device"
	"github.com/roseinfer/roseinfer/engine/model"
	"github.com/roseinfer/roseinfer/engine/sample"
)

// smallConfig is multi-head and fast; the tiny preset runs too where cheap.
var smallConfig = model.Config{NumLayers: 2, NumHeads: 4, Channels: 32, MaxSeqLen: 96, VocabSize: 500, LayerNormEpsilon: 1e-5, EOSTokenID: 499}

func randomPrompt(rng *rand.Rand, n, vocab int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(rng.IntN(vocab))
	}
	return p
}

// TestBatchedEqualsSingle runs several sequences through randomly mixed
// steps — prefill chunks of random sizes next to decode tokens of other
// sequences, sequences sitting out steps — and checks every sampled row
// equals, bit for bit, the row of the same sequence run alone with its whole
// prompt in one chunk. This covers batched == one-at-a-time and chunked
// prefill == whole prefill together.
func TestBatchedEqualsSingle(t *testing.T) {
	tiny, _ := model.Preset("tiny")
	qwen3Tiny, _ := model.Preset("qwen3-tiny") // grouped heads, rotary positions
	for _, tc := range []struct {
		name                string
		cfg                 model.Config
		numSeqs, maxPrompt  int
		numDecode, maxChunk int
		workers             int
		seed                uint64
	}{
		{"small", smallConfig, 7, 60, 10, 24, 2, 1},
		{"small one worker", smallConfig, 5, 40, 6, 9, 1, 2},
		{"tiny", tiny, 4, 70, 4, 32, 2, 3},
		{"qwen3-tiny", qwen3Tiny, 4, 50, 4, 16, 2, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(tc.seed, 0))
			w, err := model.InitRandom(tc.cfg, 5)
			if err != nil {
				t.Fatal(err)
			}
			prompts := make([][]int32, tc.numSeqs)
			want := make([][][]float32, tc.numSeqs)
			alone := newTestDevice(t, w, 1, Options{NumThreads: tc.workers})
			for i := range prompts {
				prompts[i] = randomPrompt(rng, 1+rng.IntN(tc.maxPrompt), tc.cfg.VocabSize)
				want[i], _ = runSingle(t, alone, blockTable(tc.cfg, 0, 1), prompts[i], []int{len(prompts[i]) - 1}, tc.numDecode)
			}

			d := newTestDevice(t, w, tc.numSeqs, Options{NumThreads: tc.workers})
			type state struct {
				pos  int // tokens fed so far
				next int32
				rows [][]float32
			}
			st := make([]state, tc.numSeqs)
			done := func(i int) bool { return len(st[i].rows) == tc.numDecode+1 }
			var logits []float32
			for {
				b := &device.Batch{}
				var sampled []int
				for i := range st {
					if done(i) || rng.IntN(10) < 3 {
						continue
					}
					s := device.Seq{SeqID: uint64(i), StartPos: st[i].pos, BlockTable: blockTable(tc.cfg, i, tc.numSeqs), BannedToken: -1}
					if rest := len(prompts[i]) - st[i].pos; rest > 0 {
						n := 1 + rng.IntN(min(rest, tc.maxChunk))
						s.Tokens = prompts[i][st[i].pos : st[i].pos+n]
						s.Sample = n == rest
					} else {
						s.Tokens = []int32{st[i].next}
						s.Sample = true
					}
					st[i].pos += len(s.Tokens)
					if s.Sample {
						sampled = append(sampled, i)
					}
					b.Seqs = append(b.Seqs, s)
				}
				if len(b.Seqs) == 0 {
					if slices.ContainsFunc(st, func(s state) bool { return len(s.rows) < tc.numDecode+1 }) {
						continue
					}
					break
				}
				if logits, err = d.ForwardLogits(b, logits); err != nil {
					t.Fatal(err)
				}
				V := tc.cfg.VocabSize
				for j, i := range sampled {
					row := slices.Clone(logits[j*V : (j+1)*V])
					st[i].rows = append(st[i].rows, row)
					st[i].next = greedy(row)
				}
			}
			for i := range st {
				for r := range want[i] {
					if !slices.Equal(st[i].rows[r], want[i][r]) {
						t.Fatalf("seq %d (prompt %d tokens) row %d differs from the sequence run alone", i, len(prompts[i]), r)
					}
				}
			}
		})
	}
}

// TestPrefixBlocksShared: a sequence whose first full blocks are another's
// cached blocks (the engine's prefix cache) starts after them and gets the
// logits of a run over its whole prompt.
func TestPrefixBlocksShared(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	w, _ := model.InitRandom(smallConfig, 6)
	a := randomPrompt(rng, 40, smallConfig.VocabSize)
	b := append(slices.Clone(a[:2*testBlockSize]), randomPrompt(rng, 9, smallConfig.VocabSize)...)

	alone := newTestDevice(t, w, 1, Options{})
	want, _ := runSingle(t, alone, blockTable(smallConfig, 0, 1), b, []int{len(b) - 1}, 3)

	d := newTestDevice(t, w, 2, Options{})
	tableA, own := blockTable(smallConfig, 0, 2), blockTable(smallConfig, 1, 2)
	if _, err := d.ForwardLogits(&device.Batch{Seqs: []device.Seq{{Tokens: a, BlockTable: tableA, BannedToken: -1}}}, nil); err != nil {
		t.Fatal(err)
	}
	tableB := append(slices.Clone(tableA[:2]), own[2:]...)
	got, _ := runSingleFrom(t, d, tableB, b, 2*testBlockSize, 3)
	for r := range want {
		if !slices.Equal(got[r], want[r]) {
			t.Fatalf("row %d differs from the unshared run", r)
		}
	}
}

// runSingleFrom is runSingle for a sequence whose first start positions are
// already in the cache.
func runSingleFrom(t *testing.T, d *Device, table, prompt []int32, start, numDecode int) ([][]float32, []int32) {
	t.Helper()
	var rows [][]float32
	var tokens []int32
	b := &device.Batch{Seqs: []device.Seq{{Tokens: prompt[start:], StartPos: start, BlockTable: table, Sample: true, BannedToken: -1}}}
	for step := 0; step <= numDecode; step++ {
		logits, err := d.ForwardLogits(b, nil)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, logits)
		tok := greedy(logits)
		tokens = append(tokens, tok)
		s := &b.Seqs[0]
		s.StartPos += len(s.Tokens)
		s.Tokens = []int32{tok}
	}
	return rows, tokens
}

// TestForwardSamples checks what Forward returns per Seq: -1 for a chunk
// that does not sample, the reference sampler's token on the step's logits
// otherwise, and the model's log-probability when asked.
func TestForwardSamples(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	w, _ := model.InitRandom(smallConfig, 7)
	d := newTestDevice(t, w, 3, Options{})
	seqs := []device.Seq{
		{SeqID: 1, Tokens: randomPrompt(rng, 20, 500), BlockTable: blockTable(smallConfig, 0, 3), BannedToken: -1},
		{SeqID: 2, Tokens: randomPrompt(rng, 5, 500), BlockTable: blockTable(smallConfig, 1, 3), Sample: true, WantLogprob: true, BannedToken: -1},
		{SeqID: 3, Tokens: randomPrompt(rng, 9, 500), BlockTable: blockTable(smallConfig, 2, 3), Sample: true,
			Params: sample.Params{Temperature: 1.3, TopK: 40, TopP: 0.8, Seed: 99}, SampleIndex: 4, BannedToken: 17},
	}
	b := &device.Batch{Seqs: seqs}
	logits, err := d.ForwardLogits(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Running the same step again rewrites the same cache entries.
	out, err := d.Forward(b, make([]device.Sampled, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 || out[0].Token != -1 {
		t.Fatalf("out = %+v, want 3 results, the first -1", out)
	}
	V := smallConfig.VocabSize
	s := sample.NewSampler(V)
	for j, i := range []int{1, 2} {
		row := logits[j*V : (j+1)*V]
		want := s.Sample(row, seqs[i].Params, seqs[i].SampleIndex, seqs[i].BannedToken)
		if out[i].Token != want {
			t.Errorf("seq %d: token %d, reference sampler %d", i, out[i].Token, want)
		}
	}
	if want := sample.LogProb(logits[:V], out[1].Token); out[1].Logprob != want || want >= 0 {
		t.Errorf("logprob %g, want %g (< 0)", out[1].Logprob, want)
	}
	if out[2].Logprob != 0 {
		t.Errorf("logprob %g without WantLogprob", out[2].Logprob)
	}
}

func TestForwardRejectsBadBatches(t *testing.T) {
	w, _ := model.InitRandom(smallConfig, 8)
	d := newTestDevice(t, w, 1, Options{})
	table := blockTable(smallConfig, 0, 1)
	ok := device.Seq{SeqID: 9, Tokens: []int32{1, 2, 3}, BlockTable: table, Sample: true, BannedToken: -1}
	with := func(edit func(*device.Seq)) *device.Batch {
		s := ok
		edit(&s)
		return &device.Batch{Seqs: []device.Seq{ok, s}}
	}
	tests := []struct {
		name    string
		batch   *device.Batch
		wantErr string
	}{
		{"nil batch", nil, "nil batch"},
		{"no tokens", with(func(s *device.Seq) { s.Tokens = nil }), "no tokens"},
		{"negative start", with(func(s *device.Seq) { s.StartPos = -1 }), "StartPos"},
		{"past the context", with(func(s *device.Seq) { s.StartPos = smallConfig.MaxSeqLen - 2 }), "beyond the model"},
		{"token too large", with(func(s *device.Seq) { s.Tokens = []int32{1, 500} }), "outside the vocabulary"},
		{"negative token", with(func(s *device.Seq) { s.Tokens = []int32{-1} }), "outside the vocabulary"},
		{"short block table", with(func(s *device.Seq) { s.StartPos = 15; s.BlockTable = table[:1] }), "cannot hold"},
		{"block out of range", with(func(s *device.Seq) { s.BlockTable = []int32{int32(len(table))} }), "outside the cache"},
		{"negative block", with(func(s *device.Seq) { s.BlockTable = []int32{-3} }), "outside the cache"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := d.Forward(tt.batch, nil)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one mentioning %q", err, tt.wantErr)
			}
		})
	}
	// A good batch still works after the rejections, and an empty one is a no-op.
	if out, err := d.Forward(&device.Batch{Seqs: []device.Seq{ok}}, nil); err != nil || len(out) != 1 || out[0].Token < 0 {
		t.Fatalf("good batch: %v %v", out, err)
	}
	if out, err := d.Forward(&device.Batch{}, nil); err != nil || len(out) != 0 {
		t.Fatalf("empty batch: %v %v", out, err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := d.Forward(&device.Batch{Seqs: []device.Seq{ok}}, nil); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Forward after Close: %v", err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	w, _ := model.InitRandom(smallConfig, 9)
	if _, err := New(nil, device.KVConfig{NumBlocks: 1, BlockSizeTokens: 16}, Options{}); err == nil {
		t.Error("nil weights: no error")
	}
	if _, err := New(w, device.KVConfig{NumBlocks: 0, BlockSizeTokens: 16}, Options{}); err == nil {
		t.Error("no blocks: no error")
	}
	if _, err := New(w, device.KVConfig{NumBlocks: 4, BlockSizeTokens: 0}, Options{}); err == nil {
		t.Error("zero block size: no error")
	}
	short := *w
	short.Data = short.Data[:10]
	if _, err := New(&short, device.KVConfig{NumBlocks: 4, BlockSizeTokens: 16}, Options{}); err == nil {
		t.Error("truncated weights: no error")
	}
}

func TestKVBytesPerBlock(t *testing.T) {
	w, _ := model.InitRandom(smallConfig, 10)
	d := newTestDevice(t, w, 1, Options{})
	total := 0
	for l := range d.kv.k {
		total += 4 * (len(d.kv.k[l]) + len(d.kv.v[l]))
	}
	if got, want := KVBytesPerBlock(smallConfig, testBlockSize)*d.kv.numBlocks, total; got != want {
		t.Errorf("KVBytesPerBlock x blocks = %d, allocated %d", got, want)
	}
}
