package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/roseinfer/roseinfer/engine/kvcache"
)

// harness drives a scheduler the way the engine does, with a fake forward:
// the token generated at index i of any sequence is 1000+i. Every step it
// checks the plan's invariants. With overlap set it keeps one dispatched step
// in flight while it plans the next, as the engine does on an AsyncDevice.
type harness struct {
	t         *testing.T
	cfg       Config
	s         *Scheduler
	pool      *kvcache.Pool
	maxTokens map[*Sequence]int
	nextID    uint64

	overlap  bool
	inFlight [][]Scheduled // dispatched plans, oldest first
	previous []Scheduled   // the last dispatched plan
}

func newHarness(t *testing.T, cfg Config, numBlocks, blockSizeTokens int, prefixCaching bool) *harness {
	t.Helper()
	pool, err := kvcache.NewPool(numBlocks, blockSizeTokens, prefixCaching)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, pool)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, cfg: cfg, s: s, pool: pool, maxTokens: map[*Sequence]int{}}
}

// prompt returns n token ids starting at first.
func prompt(first, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(first + i)
	}
	return out
}

func (h *harness) add(tokens []int32, maxTokens int) *Sequence {
	h.nextID++
	seq := NewSequence(h.nextID, tokens, maxTokens)
	h.maxTokens[seq] = maxTokens
	h.s.Add(seq)
	return seq
}

// step runs one schedule/dispatch cycle, completes the steps that should not
// stay in flight, and returns a copy of the plan.
func (h *harness) step() []Scheduled {
	h.t.Helper()
	plan := slices.Clone(h.s.Schedule())
	h.checkPlan(plan)
	if len(plan) > 0 {
		h.s.Dispatch(plan)
		h.inFlight = append(h.inFlight, plan)
		h.previous = plan
	}
	keep := 0
	if h.overlap && len(plan) > 0 && !h.s.NeedsDrain() {
		keep = 1
	}
	for len(h.inFlight) > keep {
		h.complete(h.inFlight[0])
		h.inFlight = h.inFlight[1:]
	}
	if err := h.pool.CheckConsistency(); err != nil {
		h.t.Fatal(err)
	}
	return plan
}

// complete applies a finished plan's tokens as the engine does: a sequence
// finished meanwhile gets nothing.
func (h *harness) complete(plan []Scheduled) {
	h.s.Complete(plan)
	for _, p := range plan {
		if !p.Sample || p.Seq.Status() != StatusRunning {
			continue
		}
		p.Seq.Append(int32(1000 + p.Seq.NumGeneratedTokens()))
		if p.Seq.NumGeneratedTokens() == h.maxTokens[p.Seq] {
			h.s.Finish(p.Seq)
		}
	}
}

// isBusy reports whether sequences are left or steps are in flight.
func (h *harness) isBusy() bool { return h.s.HasWork() || len(h.inFlight) > 0 }

func (h *harness) checkPlan(plan []Scheduled) {
	h.t.Helper()
	numTokens := 0
	seen := map[*Sequence]bool{}
	sawPrefill := false
	for _, p := range plan {
		seq := p.Seq
		numTokens += p.NumTokens
		if seen[seq] {
			h.t.Fatalf("sequence %d twice in one plan", seq.ID)
		}
		seen[seq] = true
		if seq.Status() != StatusRunning {
			h.t.Fatalf("sequence %d planned with status %d", seq.ID, seq.Status())
		}
		if p.StartPos != seq.NumComputedTokens || p.NumTokens < 1 || p.StartPos+p.NumTokens > seq.numTokens() {
			h.t.Fatalf("sequence %d: chunk [%d,+%d) of %d tokens, %d computed", seq.ID, p.StartPos, p.NumTokens, seq.numTokens(), seq.NumComputedTokens)
		}
		if p.Sample != (p.StartPos+p.NumTokens == seq.numTokens()) {
			h.t.Fatalf("sequence %d: Sample=%v for chunk ending at %d of %d", seq.ID, p.Sample, p.StartPos+p.NumTokens, seq.numTokens())
		}
		if p.SampleIndex != seq.numSampledTokens() || (p.Sample && p.SampleIndex >= h.maxTokens[seq]) {
			h.t.Fatalf("sequence %d: sample index %d with %d sampled, max %d", seq.ID, p.SampleIndex, seq.numSampledTokens(), h.maxTokens[seq])
		}
		if p.FromPrevious != (p.StartPos+p.NumTokens > len(seq.Tokens)) {
			h.t.Fatalf("sequence %d: FromPrevious=%v for chunk ending at %d of %d known tokens", seq.ID, p.FromPrevious, p.StartPos+p.NumTokens, len(seq.Tokens))
		}
		if p.FromPrevious && (p.NumTokens != 1 || !slices.ContainsFunc(h.previous, func(q Scheduled) bool { return q.Seq == seq && q.Sample })) {
			h.t.Fatalf("sequence %d: %d tokens fed from a previous step that did not sample it", seq.ID, p.NumTokens)
		}
		if got := len(seq.BlockTable()) * h.pool.BlockSizeTokens(); got < p.StartPos+p.NumTokens {
			h.t.Fatalf("sequence %d: blocks cover %d positions, chunk ends at %d", seq.ID, got, p.StartPos+p.NumTokens)
		}
		isDecode := seq.numSampledTokens() > 0 && p.NumTokens == 1 && p.Sample
		if isDecode && sawPrefill {
			h.t.Fatalf("decode of sequence %d planned after a prefill chunk", seq.ID)
		}
		sawPrefill = sawPrefill || !isDecode
		if !h.cfg.ChunkedPrefill && !p.Sample {
			h.t.Fatalf("non-chunked mode fed sequence %d a partial prompt", seq.ID)
		}
		if h.cfg.ChunkedPrefill && p.NumTokens > h.cfg.PrefillChunkSize {
			h.t.Fatalf("chunk of %d tokens over the chunk size %d", p.NumTokens, h.cfg.PrefillChunkSize)
		}
	}
	if numTokens > h.cfg.MaxNumBatchedTokens {
		h.t.Fatalf("plan feeds %d tokens, budget %d", numTokens, h.cfg.MaxNumBatchedTokens)
	}
	if len(plan) > h.cfg.MaxNumSeqs {
		h.t.Fatalf("plan has %d sequences, max %d", len(plan), h.cfg.MaxNumSeqs)
	}
}

// run steps until nothing is left, at most limit steps.
func (h *harness) run(limit int) {
	h.t.Helper()
	for range limit {
		if !h.isBusy() {
			return
		}
		h.step()
	}
	h.t.Fatalf("work left after %d steps", limit)
}

// chunkSizes lists NumTokens of seq in each plan it appears in.
func chunkSizes(plans [][]Scheduled, seq *Sequence) []int {
	var out []int
	for _, plan := range plans {
		for _, p := range plan {
			if p.Seq == seq {
				out = append(out, p.NumTokens)
			}
		}
	}
	return out
}

func TestNewRejectsBadConfig(t *testing.T) {
	pool, _ := kvcache.NewPool(8, 4, false)
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"no sequences", Config{MaxNumSeqs: 0, MaxNumBatchedTokens: 8}},
		{"budget below sequences", Config{MaxNumSeqs: 16, MaxNumBatchedTokens: 8}},
		{"zero chunk in chunked mode", Config{MaxNumSeqs: 1, MaxNumBatchedTokens: 8, ChunkedPrefill: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.cfg, pool); err == nil {
				t.Fatal("want an error")
			}
		})
	}
}

func TestPrefillChunks(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cfg       Config
		promptLen int
		want      []int // tokens fed per step, prefill then 2 decodes
	}{
		{"chunked long prompt", Config{MaxNumSeqs: 4, MaxNumBatchedTokens: 64, PrefillChunkSize: 8, ChunkedPrefill: true}, 20, []int{8, 8, 4, 1, 1}},
		{"chunked prompt of one chunk", Config{MaxNumSeqs: 4, MaxNumBatchedTokens: 64, PrefillChunkSize: 8, ChunkedPrefill: true}, 8, []int{8, 1, 1}},
		{"chunk limited by budget", Config{MaxNumSeqs: 4, MaxNumBatchedTokens: 6, PrefillChunkSize: 8, ChunkedPrefill: true}, 20, []int{6, 6, 6, 2, 1, 1}},
		{"not chunked: whole prompt", Config{MaxNumSeqs: 4, MaxNumBatchedTokens: 64, PrefillChunkSize: 8}, 20, []int{20, 1, 1}},
		{"one-token prompt", Config{MaxNumSeqs: 4, MaxNumBatchedTokens: 64, PrefillChunkSize: 8, ChunkedPrefill: true}, 1, []int{1, 1, 1}},
	} {
		for _, overlap := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/overlap=%v", tc.name, overlap), func(t *testing.T) {
				h := newHarness(t, tc.cfg, 64, 4, false)
				h.overlap = overlap
				seq := h.add(prompt(0, tc.promptLen), 3)
				var plans [][]Scheduled
				for h.isBusy() {
					plans = append(plans, h.step())
				}
				if got := chunkSizes(plans, seq); !slices.Equal(got, tc.want) {
					t.Fatalf("tokens per step %v, want %v", got, tc.want)
				}
				if seq.NumGeneratedTokens() != 3 || h.pool.NumFreeBlocks() != 64 {
					t.Fatalf("generated %d, free blocks %d", seq.NumGeneratedTokens(), h.pool.NumFreeBlocks())
				}
			})
		}
	}
}

func TestDecodesGoFirstAndPrefillTakesTheRest(t *testing.T) {
	cfg := Config{MaxNumSeqs: 8, MaxNumBatchedTokens: 40, PrefillChunkSize: 64, ChunkedPrefill: true}
	h := newHarness(t, cfg, 64, 4, false)
	var decoders []*Sequence
	for i := range 3 {
		decoders = append(decoders, h.add(prompt(100*i, 5), 10))
	}
	h.step() // the three prompts
	long := h.add(prompt(500, 100), 2)
	plan := h.step()
	if len(plan) != 4 || plan[3].Seq != long || plan[3].NumTokens != 37 {
		t.Fatalf("want 3 decodes then a 37-token chunk, got %+v", plan)
	}
	for i, d := range decoders {
		if plan[i].Seq != d || plan[i].NumTokens != 1 {
			t.Fatalf("plan[%d] = %+v, want a decode of sequence %d", i, plan[i], d.ID)
		}
	}
}

// A stream of long prompts must not stop running sequences from decoding.
func TestDecodeNeverStarves(t *testing.T) {
	for _, chunked := range []bool{true, false} {
		cfg := Config{MaxNumSeqs: 16, MaxNumBatchedTokens: 64, PrefillChunkSize: 32, ChunkedPrefill: chunked}
		h := newHarness(t, cfg, 512, 4, false)
		decoder := h.add(prompt(0, 4), 30)
		h.step()
		for i := range 30 {
			h.add(prompt(1000*(i+1), 60), 1) // 60 > what is left of the budget
			plan := h.step()
			if decoder.Status() == StatusFinished {
				break
			}
			if !slices.ContainsFunc(plan, func(p Scheduled) bool { return p.Seq == decoder }) {
				t.Fatalf("chunked=%v step %d: running decoder left out", chunked, i)
			}
		}
		h.run(100)
	}
}

func TestFCFSAndNonChunkedBudget(t *testing.T) {
	cfg := Config{MaxNumSeqs: 8, MaxNumBatchedTokens: 32}
	h := newHarness(t, cfg, 64, 4, false)
	a := h.add(prompt(0, 2), 3)
	b := h.add(prompt(10, 2), 3)
	h.step()
	big := h.add(prompt(100, 31), 1) // 31 > 32 - 2 decode tokens
	small := h.add(prompt(200, 2), 1)
	plan := h.step()
	if len(plan) != 2 || big.Status() != StatusWaiting || small.Status() != StatusWaiting {
		t.Fatalf("the 31-token prompt must wait for budget and the small one behind it: plan %+v", plan)
	}
	h.step() // a and b finish
	plan = h.step()
	if len(plan) != 1 || plan[0].Seq != big || a.Status() != StatusFinished || b.Status() != StatusFinished {
		t.Fatalf("want the big prompt alone once the decoders finished, got %+v", plan)
	}
	h.run(10)
}

func TestMaxNumSeqsBoundsRunning(t *testing.T) {
	cfg := Config{MaxNumSeqs: 2, MaxNumBatchedTokens: 64, PrefillChunkSize: 16, ChunkedPrefill: true}
	h := newHarness(t, cfg, 64, 4, false)
	for i := range 5 {
		h.add(prompt(10*i, 3), 4)
	}
	for range 6 {
		plan := h.step()
		if h.s.NumRunning() > 2 || len(plan) > 2 {
			t.Fatalf("%d running, %d planned; max 2", h.s.NumRunning(), len(plan))
		}
	}
	h.run(100)
}

func TestPreemptionRequeuesLastAdmittedAndRecomputes(t *testing.T) {
	// 6 blocks of 4 tokens; two sequences of 8+12 tokens would need 10 blocks.
	cfg := Config{MaxNumSeqs: 4, MaxNumBatchedTokens: 64}
	h := newHarness(t, cfg, 6, 4, false)
	first := h.add(prompt(0, 8), 12)
	second := h.add(prompt(100, 8), 12)
	var plans [][]Scheduled
	for second.NumPreemptions == 0 {
		if len(plans) > 20 {
			t.Fatal("no preemption")
		}
		plans = append(plans, h.step())
	}
	if first.NumPreemptions != 0 || second.Status() != StatusWaiting || h.s.NumWaiting() != 1 {
		t.Fatalf("want the later sequence preempted and waiting, first preempted %d times", first.NumPreemptions)
	}
	numGenerated := second.NumGeneratedTokens()
	if numGenerated == 0 || len(second.BlockTable()) != 0 || second.NumComputedTokens != 0 {
		t.Fatalf("preempted sequence: %d generated, %d blocks, %d computed", numGenerated, len(second.BlockTable()), second.NumComputedTokens)
	}
	for second.Status() == StatusWaiting {
		plans = append(plans, h.step())
	}
	// Readmitted: prompt and generated tokens recomputed in one step.
	last := plans[len(plans)-1]
	i := slices.IndexFunc(last, func(p Scheduled) bool { return p.Seq == second })
	if i < 0 || last[i].StartPos != 0 || last[i].NumTokens != 8+numGenerated || !last[i].Sample {
		t.Fatalf("readmission plan %+v, want all %d tokens recomputed", last, 8+numGenerated)
	}
	h.run(100)
	for _, seq := range []*Sequence{first, second} {
		if !slices.Equal(seq.Tokens[8:], prompt(1000, 12)) {
			t.Fatalf("sequence %d generated %v", seq.ID, seq.Tokens[8:])
		}
	}
	if h.pool.NumFreeBlocks() != 6 || h.s.NumPreemptions() == 0 {
		t.Fatalf("free %d, preemptions %d", h.pool.NumFreeBlocks(), h.s.NumPreemptions())
	}
}

func TestPrefixHitsSkipCachedBlocks(t *testing.T) {
	for _, tc := range []struct {
		name          string
		cached, query []int32
		wantStart     int // first position computed for the query
	}{
		{"same prompt: last token always computed", prompt(0, 36), prompt(0, 36), 32},
		{"prompt a block multiple: last block recomputed", prompt(0, 32), prompt(0, 32), 28},
		{"shared prefix then new tokens", prompt(0, 36), append(prompt(0, 20), prompt(900, 9)...), 20},
		{"no shared block", prompt(0, 36), prompt(1, 36), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{MaxNumSeqs: 4, MaxNumBatchedTokens: 64, PrefillChunkSize: 64, ChunkedPrefill: true}
			h := newHarness(t, cfg, 32, 4, true)
			h.add(tc.cached, 1)
			h.run(10)
			seq := h.add(tc.query, 2)
			plan := h.step()
			if len(plan) != 1 || plan[0].StartPos != tc.wantStart || plan[0].NumTokens != len(tc.query)-tc.wantStart {
				t.Fatalf("plan %+v, want computation from %d", plan, tc.wantStart)
			}
			if seq.NumCachedTokens != tc.wantStart {
				t.Fatalf("NumCachedTokens = %d, want %d", seq.NumCachedTokens, tc.wantStart)
			}
			wantQueried := int64(len(tc.cached) + len(tc.query))
			if q, hit := h.pool.PrefixQueriedTokens(), h.pool.PrefixHitTokens(); q != wantQueried || hit != int64(tc.wantStart) {
				t.Fatalf("counters queried %d hit %d, want %d and %d", q, hit, wantQueried, tc.wantStart)
			}
			h.run(10)
		})
	}
}

func TestFinishFreesWaitingAndRunning(t *testing.T) {
	cfg := Config{MaxNumSeqs: 1, MaxNumBatchedTokens: 64, PrefillChunkSize: 4, ChunkedPrefill: true}
	h := newHarness(t, cfg, 16, 4, true)
	running := h.add(prompt(0, 10), 5)
	waiting := h.add(prompt(50, 10), 5)
	h.step()
	h.s.Finish(waiting)
	h.s.Finish(running)
	h.s.Finish(running) // twice is harmless
	if h.s.HasWork() || h.pool.NumUsedBlocks() != 0 || len(h.s.Schedule()) != 0 {
		t.Fatalf("work left: running %d waiting %d used blocks %d", h.s.NumRunning(), h.s.NumWaiting(), h.pool.NumUsedBlocks())
	}
}

// TestRandomWorkload mixes arrivals, shared prefixes, aborts and a pool small
// enough to preempt, in every mode, and checks that every sequence completes
// with the right tokens and every block comes back.
func TestRandomWorkload(t *testing.T) {
	for _, tc := range []struct {
		name    string
		chunked bool
		prefix  bool
		overlap bool
	}{
		{"chunked with prefix cache", true, true, false},
		{"chunked", true, false, false},
		{"whole prompts with prefix cache", false, true, false},
		{"whole prompts", false, false, false},
		{"overlap, chunked with prefix cache", true, true, true},
		{"overlap, chunked", true, false, true},
		{"overlap, whole prompts with prefix cache", false, true, true},
		{"overlap, whole prompts", false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 11))
			cfg := Config{MaxNumSeqs: 8, MaxNumBatchedTokens: 48, PrefillChunkSize: 12, ChunkedPrefill: tc.chunked}
			h := newHarness(t, cfg, 24, 4, tc.prefix)
			h.overlap = tc.overlap
			var all []*Sequence
			aborted := map[*Sequence]bool{}
			for step := 0; step < 3000 && (len(all) < 300 || h.isBusy()); step++ {
				if len(all) < 300 && rng.IntN(2) == 0 {
					p := append(prompt(0, rng.IntN(3)*8), prompt(100+rng.IntN(1000), 1+rng.IntN(20))...)
					all = append(all, h.add(p, 1+rng.IntN(16)))
				}
				if len(all) > 0 && rng.IntN(10) == 0 {
					seq := all[rng.IntN(len(all))]
					if seq.Status() != StatusFinished {
						aborted[seq] = true
						h.s.Finish(seq)
					}
				}
				h.step()
			}
			if h.isBusy() {
				t.Fatal("work left")
			}
			for _, seq := range all {
				if aborted[seq] {
					continue
				}
				want := prompt(1000, h.maxTokens[seq])
				if !slices.Equal(seq.Tokens[seq.NumPromptTokens:], want) {
					t.Fatalf("sequence %d generated %v, want %v", seq.ID, seq.Tokens[seq.NumPromptTokens:], want)
				}
			}
			if h.pool.NumUsedBlocks() != 0 {
				t.Fatalf("%d blocks still used", h.pool.NumUsedBlocks())
			}
			if h.s.NumPreemptions() == 0 {
				t.Fatal("the pool never ran short; the test covers too little")
			}
			if tc.prefix && h.pool.PrefixHitTokens() == 0 {
				t.Fatal("no prefix hit; the test covers too little")
			}
		})
	}
}

// With overlap the next step is planned from the pending token: positions
// advance, the token is fed from the previous step, and nothing is planned
// past max_tokens.
func TestOverlapPlansOnPendingTokens(t *testing.T) {
	cfg := Config{MaxNumSeqs: 4, MaxNumBatchedTokens: 64, PrefillChunkSize: 8, ChunkedPrefill: true}
	h := newHarness(t, cfg, 16, 4, false)
	h.overlap = true
	seq := h.add(prompt(0, 5), 3)
	for i, want := range []struct {
		plan        Scheduled // Seq filled in below
		numAppended int       // generated tokens in Tokens after the step
	}{
		{Scheduled{StartPos: 0, NumTokens: 5, Sample: true, SampleIndex: 0}, 0},
		{Scheduled{StartPos: 5, NumTokens: 1, Sample: true, SampleIndex: 1, FromPrevious: true}, 1},
		{Scheduled{StartPos: 6, NumTokens: 1, Sample: true, SampleIndex: 2, FromPrevious: true}, 2},
	} {
		plan := h.step()
		want.plan.Seq = seq
		if len(plan) != 1 || plan[0] != want.plan {
			t.Fatalf("step %d: plan %+v, want %+v", i, plan, want.plan)
		}
		if seq.NumGeneratedTokens() != want.numAppended {
			t.Fatalf("step %d: %d tokens appended, want %d", i, seq.NumGeneratedTokens(), want.numAppended)
		}
	}
	// All three tokens sampled: nothing more is planned; the last step drains.
	if plan := h.step(); len(plan) != 0 {
		t.Fatalf("planned past max_tokens: %+v", plan)
	}
	if !slices.Equal(seq.Tokens[5:], prompt(1000, 3)) || seq.Status() != StatusFinished || h.pool.NumUsedBlocks() != 0 {
		t.Fatalf("tokens %v, status %d, %d blocks used", seq.Tokens[5:], seq.Status(), h.pool.NumUsedBlocks())
	}
}

// A sequence finished while a step of it is on the device keeps its blocks
// (the device may still write them) until that step completes.
func TestFinishWithStepInFlightKeepsBlocks(t *testing.T) {
	cfg := Config{MaxNumSeqs: 4, MaxNumBatchedTokens: 64, PrefillChunkSize: 16, ChunkedPrefill: true}
	h := newHarness(t, cfg, 16, 4, true)
	h.overlap = true
	seq := h.add(prompt(0, 9), 10)
	h.step()
	h.s.Finish(seq)
	if h.pool.NumUsedBlocks() != 3 || h.s.HasWork() || seq.Status() != StatusFinished {
		t.Fatalf("%d blocks used, want 3 until the step completes; has work %v", h.pool.NumUsedBlocks(), h.s.HasWork())
	}
	if plan := h.step(); len(plan) != 0 {
		t.Fatalf("finished sequence planned: %+v", plan)
	}
	if h.pool.NumUsedBlocks() != 0 || len(h.inFlight) != 0 {
		t.Fatalf("%d blocks used, %d steps in flight after the drain", h.pool.NumUsedBlocks(), len(h.inFlight))
	}
	if h.pool.NumCachedIdleBlocks() != 0 {
		t.Fatal("a finished sequence's blocks were registered in the prefix cache")
	}
}

// Preempting with a step in flight would free blocks the device may write
// and lose a token still on it: the scheduler asks for a drain instead and
// preempts at the next step, with nothing in flight.
func TestOverlapDrainsBeforePreempting(t *testing.T) {
	cfg := Config{MaxNumSeqs: 4, MaxNumBatchedTokens: 64}
	h := newHarness(t, cfg, 6, 4, false)
	h.overlap = true
	first := h.add(prompt(0, 8), 12)
	second := h.add(prompt(100, 8), 12)
	numDrains := 0
	for step := 0; h.isBusy(); step++ {
		if step > 100 {
			t.Fatal("work left after 100 steps")
		}
		inFlight, preemptions := len(h.inFlight), h.s.NumPreemptions()
		h.step()
		if h.s.NeedsDrain() {
			numDrains++
		}
		if h.s.NumPreemptions() > preemptions && inFlight > 0 {
			t.Fatalf("step %d preempted with %d steps in flight", step, inFlight)
		}
	}
	if numDrains == 0 || h.s.NumPreemptions() == 0 {
		t.Fatalf("%d drains, %d preemptions: the test covers too little", numDrains, h.s.NumPreemptions())
	}
	for _, seq := range []*Sequence{first, second} {
		if !slices.Equal(seq.Tokens[8:], prompt(1000, 12)) {
			t.Fatalf("sequence %d generated %v", seq.ID, seq.Tokens[8:])
		}
	}
	if h.pool.NumFreeBlocks() != 6 {
		t.Fatalf("%d of 6 blocks free", h.pool.NumFreeBlocks())
	}
}
