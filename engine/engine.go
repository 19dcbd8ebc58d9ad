// Package engine runs GPT-2 generation: requests come in through Submit, one
// loop goroutine batches them step by step (scheduler → device → tokens), and
// each request's tokens flow back on its Stream. With overlap scheduling the
// loop plans and submits step N+1 before it collects step N, so its own work
// hides behind the device's.
//
// The engine owns the scheduler (which owns the KV block pool) and the device.
// It never imports the HTTP server or the harness.
package engine

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/roseinfer/roseinfer/engine/device"
	"github.com/roseinfer/roseinfer/engine/kvcache"
	"github.com/roseinfer/roseinfer/engine/scheduler"
)

// Defaults for zero Config fields.
const (
	DefaultMaxNumSeqs          = 256
	DefaultMaxNumBatchedTokens = 2048
	// DefaultPrefillChunkSize caps a sequence's prompt tokens in a step at
	// the step's whole default budget, as vLLM and SGLang do (their chunk
	// is the step budget, 2,048 by default): a long prompt is prefilled in
	// as few steps as the budget allows. On the H100 with Qwen3-0.6B, the
	// Azure conversation trace at scale 0.4 had TTFT p99 6.8 ms at 2,048
	// against 8.7 ms at the original's 256, with the same TPOT p99 (1.50 ms)
	// and ITL p99 (docs/BENCHMARKS.md).
	DefaultPrefillChunkSize = DefaultMaxNumBatchedTokens
	DefaultBlockSizeTokens  = 16
)

// Engine is a running engine. Its methods are safe for concurrent use.
type Engine struct {
	cfg   Config
	dev   device.Device
	async device.AsyncDevice // dev, when it runs steps asynchronously and overlap is on; else nil
	sched *scheduler.Scheduler

	// Shared with Submit, Abort, Stats and Close.
	mu       sync.Mutex
	incoming []*Stream // submitted, not yet handed to the scheduler
	aborts   []*Stream
	isClosed bool
	stats    Stats // published by the loop after every step
	nextID   uint64
	wake     chan struct{} // capacity 1: "something changed", never blocks a sender
	done     chan struct{} // closed when the loop has exited
	closeErr error
	closing  sync.Once

	// Owned by the loop goroutine.
	streams       map[uint64]*Stream // live sequences by id
	takenIncoming []*Stream          // swapped with incoming so intake never allocates
	takenAborts   []*Stream
	batch         device.Batch // reused every step
	flights       flights      // steps submitted to the device, not yet collected
	numSteps      int64
	obs           observer // Config.Observer's view of the loop (observe.go)
}

// Stream is one request's output.
type Stream struct {
	e      *Engine
	seq    *scheduler.Sequence
	req    Request // PromptTokens dropped; the sequence holds the tokens
	out    chan Output
	timing Timing

	isAborted atomic.Bool // Abort was called
	isDone    atomic.Bool // the final Output was sent
	isEnded   bool        // loop-owned twin of isDone
}

// New validates cfg, fills in defaults and starts the loop. The engine owns
// dev from now on and closes it in Close. dev's KV storage must match
// cfg.NumBlocks and cfg.BlockSizeTokens.
func New(cfg Config, dev device.Device) (*Engine, error) {
	cfg = withDefaults(cfg)
	switch {
	case cfg.NumBlocks <= 0:
		return nil, fmt.Errorf("engine: the KV pool size (blocks) must be set, got %d", cfg.NumBlocks)
	case cfg.MaxModelLen <= 0:
		return nil, fmt.Errorf("engine: the context length must be set, got %d", cfg.MaxModelLen)
	case !cfg.ChunkedPrefill && cfg.MaxNumBatchedTokens < cfg.MaxModelLen:
		// Unchunked, a prompt goes whole into one step: the longest must fit.
		return nil, fmt.Errorf("engine: without chunked prefill the token budget (%d) must cover the context (%d)",
			cfg.MaxNumBatchedTokens, cfg.MaxModelLen)
	}
	pool, err := kvcache.NewPool(cfg.NumBlocks, cfg.BlockSizeTokens, cfg.PrefixCache)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	sched, err := scheduler.New(scheduler.Config{
		MaxNumSeqs:          cfg.MaxNumSeqs,
		MaxNumBatchedTokens: cfg.MaxNumBatchedTokens,
		PrefillChunkSize:    cfg.PrefillChunkSize,
		ChunkedPrefill:      cfg.ChunkedPrefill,
	}, pool)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	e := &Engine{
		cfg:     cfg,
		dev:     dev,
		sched:   sched,
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		streams: make(map[uint64]*Stream),
		batch:   device.Batch{Seqs: make([]device.Seq, 0, cfg.MaxNumSeqs)},
		obs:     observer{obs: cfg.Observer},
	}
	if a, ok := dev.(device.AsyncDevice); ok && cfg.OverlapSchedule {
		e.async = a
	}
	e.publishStats()
	go e.loop()
	return e, nil
}

func withDefaults(cfg Config) Config {
	if cfg.MaxNumSeqs == 0 {
		cfg.MaxNumSeqs = DefaultMaxNumSeqs
	}
	if cfg.MaxNumBatchedTokens == 0 {
		cfg.MaxNumBatchedTokens = DefaultMaxNumBatchedTokens
	}
	if cfg.PrefillChunkSize == 0 {
		cfg.PrefillChunkSize = DefaultPrefillChunkSize
	}
	if cfg.BlockSizeTokens == 0 {
		cfg.BlockSizeTokens = DefaultBlockSizeTokens
	}
	return cfg
}

// Submit queues a request. Its tokens arrive on the returned Stream.
func (e *Engine) Submit(req *Request) (*Stream, error) {
	arrival := time.Now()
	if err := e.validate(req); err != nil {
		return nil, err
	}
	s := &Stream{
		e:   e,
		req: *req,
		// One Output per token plus a possible token-less final one (abort):
		// the loop never blocks on a slow reader. validate bounded MaxTokens
		// by the context, so a client's number cannot size these.
		out:    make(chan Output, req.MaxTokens+1),
		timing: Timing{Arrival: arrival, Tokens: make([]time.Time, 0, req.MaxTokens)},
	}
	s.req.PromptTokens = nil
	if !req.HasSeed {
		s.req.Params.Seed = rand.Uint64()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.isClosed {
		return nil, ErrClosed
	}
	if e.cfg.MaxPending > 0 && e.stats.NumWaiting+len(e.incoming) >= e.cfg.MaxPending {
		return nil, ErrOverloaded
	}
	e.nextID++
	s.seq = scheduler.NewSequence(e.nextID, req.PromptTokens, req.MaxTokens)
	e.incoming = append(e.incoming, s)
	e.signal()
	return s, nil
}

// validate checks what the engine itself relies on; the server checks the
// rest of the API's rules before it gets here.
func (e *Engine) validate(req *Request) error {
	switch {
	case req == nil:
		return errors.New("engine: nil request")
	case len(req.PromptTokens) == 0:
		return errors.New("engine: empty prompt")
	case req.MaxTokens < 1:
		return fmt.Errorf("engine: max_tokens must be at least 1, got %d", req.MaxTokens)
	case req.MaxTokens > e.cfg.MaxModelLen-len(req.PromptTokens): // not len+MaxTokens: it may wrap negative
		return fmt.Errorf("%w: %d prompt + %d new tokens > %d", ErrTooLong, len(req.PromptTokens), req.MaxTokens, e.cfg.MaxModelLen)
	}
	// The last token is never fed, so KV is needed for one token less.
	numBlocks := (len(req.PromptTokens) + req.MaxTokens - 1 + e.cfg.BlockSizeTokens - 1) / e.cfg.BlockSizeTokens
	if numBlocks > e.cfg.NumBlocks {
		return fmt.Errorf("%w: needs %d KV blocks, the pool has %d", ErrTooLong, numBlocks, e.cfg.NumBlocks)
	}
	for i, tok := range req.PromptTokens {
		if tok < 0 {
			return fmt.Errorf("engine: prompt token %d is negative (%d)", i, tok)
		}
	}
	return nil
}

// signal wakes the loop if it sleeps. Never blocks.
func (e *Engine) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Outputs delivers one Output per generated token; the last one has Finished
// set, then the channel is closed. A request that ends by EOS delivers the
// EOS token in its last Output. The channel is buffered for the whole
// request, so a slow reader never holds up the engine.
func (s *Stream) Outputs() <-chan Output { return s.out }

// Abort ends the request (client gone): within one engine step its blocks are
// freed and the stream ends with FinishAbort. Safe to call any number of
// times, from any goroutine, also after the stream ended.
func (s *Stream) Abort() {
	if s.isDone.Load() || !s.isAborted.CompareAndSwap(false, true) {
		return
	}
	e := s.e
	e.mu.Lock()
	if !e.isClosed {
		e.aborts = append(e.aborts, s)
	}
	e.mu.Unlock()
	e.signal()
}

// Timing is the server-side record of the request. Read it only after the
// Outputs channel is closed (the close orders the loop's writes before it).
func (s *Stream) Timing() Timing { return s.timing }

// Stats is a snapshot of the engine's counters, as of the last step.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.stats
	st.NumWaiting += len(e.incoming)
	return st
}

// Close stops the loop, ends every live request with FinishAbort, and closes
// the device. Safe to call twice; later Submits fail with ErrClosed.
func (e *Engine) Close() error {
	e.closing.Do(func() {
		e.mu.Lock()
		e.isClosed = true
		e.mu.Unlock()
		e.signal()
		<-e.done
		e.closeErr = e.dev.Close()
	})
	return e.closeErr
}

// loop is the engine: take in requests and aborts, run a step, repeat; sleep
// on wake when there is nothing to do.
func (e *Engine) loop() {
	defer close(e.done)
	for {
		if !e.intake() {
			e.shutdown()
			return
		}
		if !e.sched.HasWork() && e.flights.n == 0 {
			// Aborts applied by intake may have emptied the engine: publish
			// before sleeping so Stats (and Submit's --max-pending check) never
			// see a stale waiting count while idle.
			e.publishStats()
			<-e.wake
			continue
		}
		e.step()
		e.publishStats()
	}
}

// intake hands new requests to the scheduler and applies aborts. It reports
// false once the engine is closed.
func (e *Engine) intake() bool {
	e.mu.Lock()
	e.incoming, e.takenIncoming = e.takenIncoming, e.incoming
	// The taken requests leave incoming now but reach the published
	// NumWaiting only at the next publish: count them as waiting meanwhile,
	// so Submit's --max-pending check (waiting + incoming) has no gap.
	e.stats.NumWaiting += len(e.takenIncoming)
	e.aborts, e.takenAborts = e.takenAborts, e.aborts
	isClosed := e.isClosed
	e.mu.Unlock()

	for _, s := range e.takenIncoming {
		e.streams[s.seq.ID] = s
		e.sched.Add(s.seq)
	}
	now := time.Now()
	for _, s := range e.takenAborts {
		e.end(s, Output{Token: -1, Finished: FinishAbort, At: now})
	}
	clear(e.takenIncoming)
	clear(e.takenAborts)
	e.takenIncoming, e.takenAborts = e.takenIncoming[:0], e.takenAborts[:0]
	return !isClosed
}

// step is one engine iteration: plan a step and submit it to the device,
// then collect the steps that should not stay on the device and apply their
// tokens.
//
// Synchronously the step collected is the one just submitted. With overlap
// the newest step stays on the device while the engine collects the one
// before it, applies its tokens and plans the next: the scheduler plans on
// from tokens still on the device, which the device feeds itself
// (device.FromPrevious). A sequence that finishes at step N may already be
// in step N+1; that result is dropped.
func (e *Engine) step() {
	e.obs.stepBegin(e.numSteps + 1)
	plan := e.sched.Schedule()
	// Admission just moved requests from waiting to running: publish now, not
	// after the step, so Submit's --max-pending check counts only the truly
	// waiting (intake counted the new ones as waiting until this point).
	e.publishStats()
	e.obs.planned(len(plan))
	defer e.obs.stepEnd()
	if len(plan) == 0 && e.flights.n == 0 {
		// Cannot happen with validated requests (each fits the pool alone);
		// if it does, wait instead of spinning.
		select {
		case <-e.wake:
		case <-time.After(time.Millisecond):
		}
		return
	}
	if len(plan) > 0 {
		e.submit(plan)
	}
	keep := e.numToLeaveInFlight(len(plan) > 0)
	for e.flights.n > keep {
		e.collect()
	}
}

// numToLeaveInFlight is how many submitted steps stay on the device while the
// loop goes round: one with overlap, none when nothing new was submitted (the
// last results are due), when the scheduler waits for a drain to preempt, or
// when the submit failed.
func (e *Engine) numToLeaveInFlight(submitted bool) int {
	if e.async == nil || !submitted || e.sched.NeedsDrain() || e.flights.newest().err != nil {
		return 0
	}
	return 1
}

// submit hands plan to the device: queued on an AsyncDevice, run at once
// otherwise. Either way the scheduler counts its tokens as computed and its
// samples as pending from now on.
func (e *Engine) submit(plan []scheduler.Scheduled) {
	e.numSteps++
	f := e.flights.push(plan)
	e.buildBatch(f.plan)
	e.obs.forwardBegin(f.plan)
	if e.async != nil {
		f.err = e.async.Submit(&e.batch)
	} else {
		f.sampled, f.err = e.dev.Forward(&e.batch, f.sampled[:0])
	}
	e.obs.forwardEnd()
	clear(e.batch.Seqs) // drop references to token slices until the next step
	e.sched.Dispatch(f.plan)
}

// collect takes the oldest submitted step's samples from the device and
// applies them; a failed step ends its sequences with FinishError.
func (e *Engine) collect() {
	f := e.flights.pop()
	defer clear(f.plan) // hold no finished sequence until the slot is reused
	e.obs.collectBegin(e.async != nil && f.err == nil)
	defer e.obs.emitEnd()
	if e.async != nil && f.err == nil {
		f.sampled, f.err = e.async.Collect(f.sampled[:0])
	}
	e.obs.emitBegin()
	if f.err != nil {
		// Ended before Complete, so its blocks are freed, never committed
		// to the prefix cache: their KV may be garbage.
		now := time.Now()
		for _, p := range f.plan {
			if s := e.streams[p.Seq.ID]; s != nil {
				e.end(s, Output{Token: -1, Finished: FinishError, At: now})
			}
		}
		e.sched.Complete(f.plan)
		return
	}
	e.sched.Complete(f.plan)
	e.applyTokens(f.plan, f.sampled)
}

// fromPrevious is the token slice of a decode whose token is still on the
// device. Devices only read it.
var fromPrevious = []int32{device.FromPrevious}

// buildBatch turns the plan into the device's batch.
func (e *Engine) buildBatch(plan []scheduler.Scheduled) {
	now := time.Now()
	e.batch.Seqs = e.batch.Seqs[:0]
	for _, p := range plan {
		s := e.streams[p.Seq.ID]
		if s.timing.FirstScheduled.IsZero() {
			s.timing.FirstScheduled = now
		}
		tokens := fromPrevious
		if !p.FromPrevious {
			tokens = p.Seq.Tokens[p.StartPos : p.StartPos+p.NumTokens]
		}
		banned := int32(-1)
		if !s.req.IgnoreEOS && p.SampleIndex < s.req.MinTokens {
			banned = e.cfg.EOSToken
		}
		e.batch.Seqs = append(e.batch.Seqs, device.Seq{
			SeqID:       p.Seq.ID,
			Tokens:      tokens,
			StartPos:    p.StartPos,
			BlockTable:  p.Seq.BlockTable(),
			Sample:      p.Sample,
			Params:      s.req.Params,
			SampleIndex: p.SampleIndex,
			WantLogprob: s.req.WantLogprobs,
			BannedToken: banned,
		})
	}
}

// applyTokens appends each sampled token, sends it, and ends sequences that
// hit EOS or max_tokens, or whose client left during the step. A sequence
// that ended after the step was planned gets nothing.
func (e *Engine) applyTokens(plan []scheduler.Scheduled, sampled []device.Sampled) {
	now := time.Now()
	for i, p := range plan {
		if !p.Sample {
			continue
		}
		s := e.streams[p.Seq.ID]
		if s == nil || s.isEnded {
			continue
		}
		if s.isAborted.Load() {
			e.end(s, Output{Token: -1, Finished: FinishAbort, At: now})
			continue
		}
		tok := sampled[i].Token
		p.Seq.Append(tok)
		s.timing.Tokens = append(s.timing.Tokens, now)
		out := Output{Token: tok, Logprob: sampled[i].Logprob, At: now}
		switch {
		case e.isStop(tok, &s.req, p.Seq.NumGeneratedTokens()):
			out.Finished = FinishStop
		case p.Seq.NumGeneratedTokens() >= s.req.MaxTokens:
			out.Finished = FinishLength
		}
		if out.Finished == NotFinished {
			s.out <- out
			continue
		}
		e.end(s, out)
	}
}

// isStop reports whether tok, the numGenerated-th output of a request,
// ends it: EOSToken or one of StopTokens, unless ignore_eos; a stop token
// within the first min_tokens outputs does not (the device banned only
// EOSToken there, so another stop id can be sampled and is kept).
func (e *Engine) isStop(tok int32, req *Request, numGenerated int) bool {
	if req.IgnoreEOS || numGenerated <= req.MinTokens {
		return false
	}
	return tok == e.cfg.EOSToken || slices.Contains(e.cfg.StopTokens, tok)
}

// end sends a stream's final Output, frees its sequence and closes it.
func (e *Engine) end(s *Stream, last Output) {
	if s.isEnded {
		return
	}
	s.isEnded = true
	e.sched.Finish(s.seq)
	delete(e.streams, s.seq.ID)
	s.timing.Finished = last.At
	s.timing.NumPreemptions = s.seq.NumPreemptions
	s.timing.NumCachedTokens = s.seq.NumCachedTokens
	s.isDone.Store(true)
	s.out <- last
	close(s.out)
}

// shutdown collects the steps still on the device and ends every live
// request; the engine is closed.
func (e *Engine) shutdown() {
	for e.flights.n > 0 {
		e.collect()
	}
	now := time.Now()
	for _, s := range e.streams {
		e.end(s, Output{Token: -1, Finished: FinishAbort, At: now})
	}
	e.publishStats()
}

// publishStats copies the loop's counters for Stats.
func (e *Engine) publishStats() {
	pool := e.sched.Pool()
	st := Stats{
		NumRunning:          e.sched.NumRunning(),
		NumWaiting:          e.sched.NumWaiting(),
		KVBlocksUsed:        pool.NumUsedBlocks(),
		KVBlocksFree:        pool.NumFreeBlocks(),
		PrefixQueriedTokens: pool.PrefixQueriedTokens(),
		PrefixHitTokens:     pool.PrefixHitTokens(),
		NumPreemptions:      e.sched.NumPreemptions(),
		NumSteps:            e.numSteps,
	}
	e.mu.Lock()
	e.stats = st
	e.mu.Unlock()
}
