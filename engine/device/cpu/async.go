package cpu

import (
	"errors"
	"fmt"
	"slices"

	"github.com/roseinfer/roseinfer/engine/device"
)

// maxAsyncSteps is how many submitted steps may wait to be collected, as on
// the CUDA device.
const maxAsyncSteps = 2

// Async runs a CPU device's steps on a goroutine of their own, so the engine
// plans step N+1 while step N computes (overlap scheduling, as on CUDA). It
// implements device.AsyncDevice: Submit copies the batch (the engine reuses
// its buffers) and queues it; the worker feeds a device.FromPrevious token
// the one its sequence sampled in the previous step, runs Forward, and
// Collect returns the samples in submission order.
type Async struct {
	dev         *Device
	steps       chan *asyncStep // to the worker
	results     chan *asyncStep // from the worker, in order
	done        chan struct{}   // closed when the worker has exited
	slots       [maxAsyncSteps]asyncStep
	next        int // slot of the next Submit
	numInFlight int
	closed      bool
}

// asyncStep is one submitted step: an owned copy of the batch, then its
// samples. Its buffers are reused by later steps in the same slot.
type asyncStep struct {
	batch  device.Batch
	tokens []int32 // storage of batch's token slices
	blocks []int32 // storage of batch's block tables
	out    []device.Sampled
	err    error
}

var _ device.AsyncDevice = (*Async)(nil)

// NewAsync makes d asynchronous. The Async owns d from now on: use only the
// Async, and Close it (which closes d).
func NewAsync(d *Device) *Async {
	a := &Async{
		dev:     d,
		steps:   make(chan *asyncStep, maxAsyncSteps),
		results: make(chan *asyncStep, maxAsyncSteps),
		done:    make(chan struct{}),
	}
	go a.work()
	return a
}

// Name is "cpu".
func (a *Async) Name() string { return "cpu" }

// Forward runs one step and waits for it: Submit then Collect.
func (a *Async) Forward(b *device.Batch, out []device.Sampled) ([]device.Sampled, error) {
	if a.numInFlight > 0 {
		return out[:0], fmt.Errorf("cpu: Forward with %d submitted steps not collected", a.numInFlight)
	}
	if err := a.Submit(b); err != nil {
		return out[:0], err
	}
	return a.Collect(out)
}

// Submit queues a copy of b for the worker and returns at once.
func (a *Async) Submit(b *device.Batch) error {
	switch {
	case a.closed:
		return errors.New("cpu: device is closed")
	case b == nil:
		return errors.New("cpu: nil batch")
	case a.numInFlight == maxAsyncSteps:
		return fmt.Errorf("cpu: %d steps already in flight; Collect first", a.numInFlight)
	}
	st := &a.slots[a.next]
	st.copyFrom(b)
	a.next = (a.next + 1) % maxAsyncSteps
	a.numInFlight++
	a.steps <- st
	return nil
}

// Collect waits for the oldest submitted step and returns its samples.
func (a *Async) Collect(out []device.Sampled) ([]device.Sampled, error) {
	if a.numInFlight == 0 {
		return out[:0], errors.New("cpu: Collect with no submitted step")
	}
	st := <-a.results
	a.numInFlight--
	if st.err != nil {
		return out[:0], st.err
	}
	return append(out[:0], st.out...), nil
}

// Close lets the worker finish the steps in flight, stops it and closes the
// device; safe to call twice.
func (a *Async) Close() error {
	if a.closed {
		return nil
	}
	a.closed = true
	close(a.steps)
	<-a.done
	return a.dev.Close()
}

// work runs the submitted steps in order. prev holds the tokens the previous
// step sampled, by sequence, for the next step's FromPrevious tokens.
func (a *Async) work() {
	defer close(a.done)
	prev := map[uint64]int32{}
	for st := range a.steps {
		st.err = resolvePrevious(&st.batch, prev)
		if st.err == nil {
			st.out, st.err = a.dev.Forward(&st.batch, st.out[:0])
		}
		clear(prev)
		if st.err == nil {
			for i := range st.batch.Seqs {
				if s := &st.batch.Seqs[i]; s.Sample {
					prev[s.SeqID] = st.out[i].Token
				}
			}
		}
		a.results <- st
	}
}

// resolvePrevious replaces each FromPrevious token of b (its own copy) with
// the token its sequence sampled in the previous step.
func resolvePrevious(b *device.Batch, prev map[uint64]int32) error {
	for i := range b.Seqs {
		s := &b.Seqs[i]
		if len(s.Tokens) == 0 || s.Tokens[0] >= 0 {
			continue
		}
		tok, ok := prev[s.SeqID]
		if !ok || len(s.Tokens) != 1 {
			return fmt.Errorf("cpu: seq %d asks for its previous sample but the previous step did not sample it", s.SeqID)
		}
		s.Tokens[0] = tok
	}
	return nil
}

// copyFrom makes st.batch a deep copy of b in st's own storage, grown once
// up front so the sub-slices handed out stay valid.
func (st *asyncStep) copyFrom(b *device.Batch) {
	numTokens, numBlocks := 0, 0
	for i := range b.Seqs {
		numTokens += len(b.Seqs[i].Tokens)
		numBlocks += len(b.Seqs[i].BlockTable)
	}
	st.tokens = slices.Grow(st.tokens[:0], numTokens)
	st.blocks = slices.Grow(st.blocks[:0], numBlocks)
	st.batch.Seqs = append(st.batch.Seqs[:0], b.Seqs...)
	for i := range st.batch.Seqs {
		s := &st.batch.Seqs[i]
		n := len(st.tokens)
		st.tokens = append(st.tokens, s.Tokens...)
		s.Tokens = st.tokens[n:len(st.tokens):len(st.tokens)]
		n = len(st.blocks)
		st.blocks = append(st.blocks, s.BlockTable...)
		s.BlockTable = st.blocks[n:len(st.blocks):len(st.blocks)]
	}
	st.out, st.err = st.out[:0], nil
}
