// Package device is the narrow boundary between the engine and the hardware.
//
// The scheduler builds a Batch (integers only: which sequences, which tokens at
// which positions, which KV blocks) and a Device runs one forward over it and
// samples. A device owns the KV cache storage; the engine owns the block ids.
// The device never decides who runs; the scheduler never imports a device.
//
// Implementations: device/cpu (pure-Go fp32 reference), device/sim (fixed
// delay, deterministic tokens: ground truth for the harness), device/cuda.
package device

import "github.com/roseinfer/roseinfer/engine/sample"

// Seq is one sequence's share of a step: a decode token or a prefill chunk.
type Seq struct {
	SeqID uint64
	// Tokens fed this step, at positions StartPos, StartPos+1, ...
	// For a decode step len(Tokens) == 1; for a prefill chunk it is the chunk.
	Tokens []int32
	// StartPos is the number of tokens of this sequence already in the KV
	// cache (cached prefix + earlier chunks + generated tokens).
	StartPos int
	// BlockTable lists the physical KV block ids covering positions
	// [0, StartPos+len(Tokens)); block i holds positions [i*B, (i+1)*B).
	BlockTable []int32
	// Sample is false for a prefill chunk that does not reach the prompt's
	// end: its logits are never computed.
	Sample bool
	// Sampling settings and the index of the token being drawn (number of
	// tokens this request has generated so far), which with Params.Seed fixes
	// the random draw.
	Params      sample.Params
	SampleIndex int
	// WantLogprob asks for the sampled token's log-probability.
	WantLogprob bool
	// BannedToken is never sampled (its logit is -inf); -1 = none. The engine
	// sets it to EOS while a request has fewer than min_tokens outputs.
	BannedToken int32
}

// Batch is one engine step: the only thing that crosses the scheduler→device seam.
type Batch struct {
	Seqs []Seq
}

// NumTokens is the number of tokens the forward processes.
func (b *Batch) NumTokens() int {
	n := 0
	for i := range b.Seqs {
		n += len(b.Seqs[i].Tokens)
	}
	return n
}

// Sampled is one sequence's result; Token is -1 for a Seq with Sample=false.
type Sampled struct {
	Token   int32
	Logprob float32 // set when WantLogprob
}

// KVConfig sizes the KV cache a device allocates.
type KVConfig struct {
	NumBlocks       int
	BlockSizeTokens int
}

// Device runs steps. Forward is called from one goroutine (the engine loop),
// so implementations need no locking; a GPU device locks that goroutine to its
// OS thread.
type Device interface {
	// Name is "cpu", "sim" or "cuda".
	Name() string
	// Forward runs the batch and returns one Sampled per Seq, in order. out is
	// reused across calls to keep the step loop allocation-free.
	Forward(b *Batch, out []Sampled) ([]Sampled, error)
	// Close frees device memory. It is safe to call twice.
	Close() error
}

// AsyncDevice is a device that can run step N while the engine prepares step
// N+1 (overlap scheduling). Submit enqueues a batch and returns at once;
// Collect returns the oldest submitted batch's samples, in submission order.
//
// In a submitted batch, a decode Seq whose Tokens[0] is FromPrevious takes, on
// the device, the token that the same SeqID sampled in the previous submitted
// batch: the engine need not wait for it to come back before planning.
type AsyncDevice interface {
	Device
	Submit(b *Batch) error
	Collect(out []Sampled) ([]Sampled, error)
}

// FromPrevious marks a decode token that the device fills in from the
// previous submitted step's sample for the same sequence (any negative value
// is read the same way).
const FromPrevious int32 = -1
