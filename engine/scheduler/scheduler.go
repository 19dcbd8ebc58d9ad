// Package scheduler decides, each engine step, which sequences run and how
// many tokens each feeds: continuous batching with chunked prefill, FCFS
// admission and preemption by recompute.
//
// It owns the waiting and running queues and the KV block pool (through
// engine/kvcache) and deals in integers only. It imports neither the engine
// nor any device: the engine turns a plan into a device.Batch.
//
// A plan's life: Schedule makes it, Dispatch records that it went to the
// device (positions advance, its samples become pending tokens), Complete
// records that the device finished it (KV blocks become reusable, pending
// tokens are handed to the engine to append). Synchronously these follow one
// another; with overlap scheduling the next plan is made and dispatched
// before the previous one completes, and the scheduler plans on from the
// pending tokens.
package scheduler

import (
	"fmt"

	"github.com/roseinfer/roseinfer/engine/kvcache"
)

// Config limits one step.
type Config struct {
	MaxNumSeqs          int  // sequences admitted (running) at once, hence per step
	MaxNumBatchedTokens int  // tokens fed per step: decode tokens + prefill chunks
	PrefillChunkSize    int  // most prompt tokens one sequence feeds per step (chunked mode)
	ChunkedPrefill      bool // false: a prompt is fed whole in one step
}

// Scheduled is one sequence's share of a step: Seq.Tokens[StartPos :
// StartPos+NumTokens] are fed at those positions.
type Scheduled struct {
	Seq       *Sequence
	StartPos  int
	NumTokens int
	// Sample is true when the chunk reaches the end of the sequence, so the
	// step yields the next token. A prompt chunk short of the end yields
	// nothing. SampleIndex is the index of that token among the generated ones.
	Sample      bool
	SampleIndex int
	// FromPrevious is true for a decode whose token was sampled by the
	// previous dispatched step and is not yet in Seq.Tokens: the device
	// feeds it (device.FromPrevious).
	FromPrevious bool
}

// Scheduler holds the queues. Not safe for concurrent use: the engine loop
// owns it.
type Scheduler struct {
	cfg  Config
	pool *kvcache.Pool

	waiting    queue
	running    []*Sequence // in admission order; compacted at each Schedule
	numRunning int         // entries of running whose status is StatusRunning

	plan           []Scheduled // reused every step
	step           int64
	didPreempt     bool // a preemption happened in this step
	numPreemptions int64

	numInFlightSteps int  // dispatched plans not yet completed
	needsDrain       bool // this step wanted to preempt while steps were in flight
}

// New makes a scheduler over pool.
func New(cfg Config, pool *kvcache.Pool) (*Scheduler, error) {
	switch {
	case cfg.MaxNumSeqs < 1:
		return nil, fmt.Errorf("scheduler: max sequences per step must be >= 1, got %d", cfg.MaxNumSeqs)
	case cfg.MaxNumBatchedTokens < cfg.MaxNumSeqs:
		// Every running sequence decodes every step; the budget must cover that.
		return nil, fmt.Errorf("scheduler: token budget %d is below max sequences %d", cfg.MaxNumBatchedTokens, cfg.MaxNumSeqs)
	case cfg.ChunkedPrefill && cfg.PrefillChunkSize < 1:
		return nil, fmt.Errorf("scheduler: prefill chunk size must be >= 1, got %d", cfg.PrefillChunkSize)
	}
	return &Scheduler{
		cfg:     cfg,
		pool:    pool,
		running: make([]*Sequence, 0, cfg.MaxNumSeqs),
		plan:    make([]Scheduled, 0, cfg.MaxNumSeqs),
	}, nil
}

// Add queues a new sequence at the back of the waiting queue. The caller must
// have checked that the sequence fits the pool on its own.
func (s *Scheduler) Add(seq *Sequence) {
	seq.status = StatusWaiting
	seq.table.Grow(s.pool.NumBlocksFor(cap(seq.Tokens)))
	s.waiting.pushBack(seq)
}

// Finish ends seq (done, aborted or failed) wherever it is and returns its
// blocks to the pool; if a dispatched step that includes seq is still on the
// device, which may yet write its KV, the blocks go back when that step
// completes. Finishing a finished sequence does nothing.
func (s *Scheduler) Finish(seq *Sequence) {
	switch seq.status {
	case StatusWaiting:
		s.waiting.remove(seq)
	case StatusRunning:
		if seq.numInFlightSteps == 0 {
			s.pool.Free(&seq.table)
		}
		s.numRunning-- // dropped from running at the next compaction
	case StatusFinished:
		return
	}
	seq.status = StatusFinished
}

// NumRunning counts admitted sequences.
func (s *Scheduler) NumRunning() int { return s.numRunning }

// NumWaiting counts queued sequences (new and preempted).
func (s *Scheduler) NumWaiting() int { return s.waiting.len() }

// HasWork reports whether any sequence is waiting or running.
func (s *Scheduler) HasWork() bool { return s.numRunning+s.waiting.len() > 0 }

// NumPreemptions counts preemptions since New.
func (s *Scheduler) NumPreemptions() int64 { return s.numPreemptions }

// Pool is the KV block pool the scheduler allocates from (for statistics).
func (s *Scheduler) Pool() *kvcache.Pool { return s.pool }

// NeedsDrain reports whether the last Schedule held back a preemption because
// steps were in flight: preempting frees blocks the device may still write,
// and drops tokens still on the device. The engine completes every step in
// flight before the next Schedule, which then preempts.
func (s *Scheduler) NeedsDrain() bool { return s.needsDrain }

// Schedule plans one step: first one decode token for every running sequence
// that has caught up (so long prompts never starve decodes), then prefill
// chunks of running sequences, then newly admitted sequences in FCFS order,
// all under MaxNumBatchedTokens. When blocks run out, the most recently
// admitted sequence not yet in the plan is preempted (or, with steps in
// flight, the plan stops growing and NeedsDrain says so). A sequence whose
// last token is sampled is never planned. The returned slice is reused by
// the next call. An empty plan means there is nothing to run now.
func (s *Scheduler) Schedule() []Scheduled {
	s.step++
	s.plan = s.plan[:0]
	s.compactRunning()
	budget := s.cfg.MaxNumBatchedTokens
	s.didPreempt, s.needsDrain = false, false

	for _, seq := range s.running {
		if seq.status != StatusRunning || seq.isComplete() || !seq.isDecoding() {
			continue
		}
		if !s.reserve(seq, 1) {
			continue
		}
		s.add(seq, 1)
		budget--
	}
	for _, seq := range s.running {
		if budget == 0 {
			break
		}
		if seq.status != StatusRunning || seq.scheduledStep == s.step || seq.isComplete() {
			continue
		}
		n := s.numPrefillTokens(seq, budget)
		if n == 0 {
			continue
		}
		if n = s.reserveChunk(seq, n); n > 0 {
			s.add(seq, n)
			budget -= n
		}
	}
	// Admitting right after preempting would only thrash: the pool is full.
	// (Compacting first also keeps a preempted sequence from being listed
	// twice in running should it be readmitted later.)
	s.compactRunning()
	for !s.didPreempt && !s.needsDrain && budget > 0 && s.numRunning < s.cfg.MaxNumSeqs && s.waiting.len() > 0 {
		n := s.admit(s.waiting.front(), budget)
		if n == 0 {
			break // FCFS: nobody overtakes the head of the queue
		}
		budget -= n
	}
	s.compactRunning()
	return s.plan
}

// numPrefillTokens is how many of seq's uncomputed tokens fit this step.
func (s *Scheduler) numPrefillTokens(seq *Sequence, budget int) int {
	n := seq.numUncomputedTokens()
	if !s.cfg.ChunkedPrefill {
		if n > budget {
			return 0
		}
		return n
	}
	return min(n, s.cfg.PrefillChunkSize, budget)
}

// reserve allocates the blocks seq needs to feed n more tokens, preempting
// later-admitted unscheduled sequences when the pool is short. When that is
// not enough seq itself is preempted and reserve returns false (also when
// preempting must wait for the steps in flight).
func (s *Scheduler) reserve(seq *Sequence, n int) bool {
	need := s.pool.NumBlocksFor(seq.NumComputedTokens+n) - seq.table.NumBlocks()
	for !s.pool.CanAllocate(need) {
		if !s.canPreempt() {
			return false
		}
		victim := s.lastUnscheduled(seq)
		if victim == nil {
			s.preempt(seq)
			return false
		}
		s.preempt(victim)
	}
	s.pool.Allocate(&seq.table, max(need, 0))
	return true
}

// reserveChunk is reserve for a prefill chunk of a running sequence. In
// chunked mode a chunk that cannot get all its blocks shrinks to the blocks
// there are; the sequence keeps what it holds and waits rather than being
// preempted, because the sequences ahead of it are making progress.
func (s *Scheduler) reserveChunk(seq *Sequence, n int) int {
	need := s.pool.NumBlocksFor(seq.NumComputedTokens+n) - seq.table.NumBlocks()
	for !s.pool.CanAllocate(need) {
		victim := s.lastUnscheduled(seq)
		if victim == nil || !s.canPreempt() {
			break
		}
		s.preempt(victim)
	}
	if !s.pool.CanAllocate(need) {
		if !s.cfg.ChunkedPrefill {
			return 0
		}
		room := (seq.table.NumBlocks()+s.pool.NumFreeBlocks())*s.pool.BlockSizeTokens() - seq.NumComputedTokens
		n = min(n, room)
		if n <= 0 {
			return 0
		}
		need = s.pool.NumBlocksFor(seq.NumComputedTokens+n) - seq.table.NumBlocks()
	}
	s.pool.Allocate(&seq.table, max(need, 0))
	return n
}

// admit tries to move the head of the waiting queue into running with its
// first chunk, reusing cached prefix blocks. It returns the number of tokens
// scheduled, 0 when the sequence does not fit this step.
func (s *Scheduler) admit(seq *Sequence, budget int) int {
	// The last token is never taken from the cache: its logits are needed.
	numHitBlocks, numIdle := s.pool.MatchPrefix(seq.Tokens[:len(seq.Tokens)-1])
	numCachedTokens := numHitBlocks * s.pool.BlockSizeTokens()
	seq.NumComputedTokens = numCachedTokens
	n := s.numPrefillTokens(seq, budget)
	need := s.pool.NumBlocksFor(numCachedTokens+n) - numHitBlocks
	if n == 0 || !s.pool.CanAllocate(need+numIdle) {
		seq.NumComputedTokens = 0
		return 0
	}
	s.waiting.popFront()
	s.pool.AttachPrefix(&seq.table, seq.Tokens, numHitBlocks)
	s.pool.Allocate(&seq.table, need)
	s.pool.CountPrefixQuery(len(seq.Tokens), numCachedTokens)
	if !seq.isAdmitted {
		seq.isAdmitted = true
		seq.NumCachedTokens = numCachedTokens
	}
	seq.status = StatusRunning
	s.running = append(s.running, seq)
	s.numRunning++
	s.add(seq, n)
	return n
}

// canPreempt reports whether a preemption may happen now: not while steps are
// in flight (NeedsDrain).
func (s *Scheduler) canPreempt() bool {
	if s.numInFlightSteps > 0 {
		s.needsDrain = true
		return false
	}
	return true
}

// preempt returns seq's blocks and puts it at the front of the waiting queue.
// Its generated tokens stay: readmission recomputes prompt and generated
// tokens (much of it often still in the prefix cache) and sampling goes on
// at the same index, so the output is unchanged.
func (s *Scheduler) preempt(seq *Sequence) {
	s.pool.Free(&seq.table)
	seq.NumComputedTokens = 0
	seq.NumPreemptions++
	seq.status = StatusWaiting
	s.numRunning--
	s.numPreemptions++
	s.didPreempt = true
	s.waiting.pushFront(seq)
}

// lastUnscheduled is the most recently admitted running sequence, other than
// except, that is not in this step's plan; nil if none.
func (s *Scheduler) lastUnscheduled(except *Sequence) *Sequence {
	for i := len(s.running) - 1; i >= 0; i-- {
		seq := s.running[i]
		if seq != except && seq.status == StatusRunning && seq.scheduledStep != s.step {
			return seq
		}
	}
	return nil
}

func (s *Scheduler) add(seq *Sequence, n int) {
	seq.scheduledStep = s.step
	s.plan = append(s.plan, Scheduled{
		Seq:          seq,
		StartPos:     seq.NumComputedTokens,
		NumTokens:    n,
		Sample:       seq.NumComputedTokens+n == seq.numTokens(),
		SampleIndex:  seq.numSampledTokens(),
		FromPrevious: seq.numPendingTokens > 0, // only a decode has one: it feeds just that token
	})
}

// compactRunning drops preempted and finished sequences from running.
func (s *Scheduler) compactRunning() {
	kept := s.running[:0]
	for _, seq := range s.running {
		if seq.status == StatusRunning {
			kept = append(kept, seq)
		}
	}
	clear(s.running[len(kept):])
	s.running = kept
}

// Dispatch records that plan went to the device: its tokens' KV is being
// written, so positions advance, and each sample becomes a pending token the
// next plan can build on. Call it once per plan, right after Schedule.
func (s *Scheduler) Dispatch(plan []Scheduled) {
	if len(plan) == 0 {
		return // nothing goes to the device, nothing will complete
	}
	for _, p := range plan {
		seq := p.Seq
		seq.NumComputedTokens = p.StartPos + p.NumTokens
		seq.numInFlightSteps++
		if p.Sample {
			seq.numPendingTokens++
		}
	}
	s.numInFlightSteps++
}

// Complete records that the device finished plan (dispatched plans complete
// in order): the fed tokens' KV exists, so full blocks become reusable
// through the prefix cache, and a sequence finished meanwhile gives its
// blocks back once no step of it is left on the device. Call it before the
// engine appends the plan's sampled tokens; a sampled token stops being
// pending here whether or not the engine appends it.
func (s *Scheduler) Complete(plan []Scheduled) {
	if len(plan) == 0 {
		return
	}
	for _, p := range plan {
		seq := p.Seq
		seq.numInFlightSteps--
		if p.Sample {
			seq.numPendingTokens--
		}
		switch {
		case seq.status == StatusRunning:
			s.pool.Commit(&seq.table, seq.Tokens, p.StartPos+p.NumTokens)
		case seq.status == StatusFinished && seq.numInFlightSteps == 0:
			s.pool.Free(&seq.table) // a no-op if Finish already freed it
		}
	}
	s.numInFlightSteps--
}
