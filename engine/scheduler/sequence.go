package scheduler

import "github.com/roseinfer/roseinfer/engine/kvcache"

// Status is where a sequence is in its life.
type Status uint8

const (
	StatusWaiting  Status = iota // queued for admission (new, or preempted)
	StatusRunning                // admitted: holds KV blocks, scheduled every step
	StatusFinished               // done or aborted; its blocks are back in the pool
)

// Sequence is one request as the scheduler sees it: token ids and counts.
//
// Tokens holds the prompt then the generated tokens. NumComputedTokens of them
// have their KV written (or, with overlap, being written by a step on the
// device); the rest are fed in the next steps. A decoding sequence has exactly
// one uncomputed token, the one sampled last step.
//
// With overlap scheduling the sequence runs ahead of Tokens: a step on the
// device may have sampled tokens not yet appended (numPendingTokens). The
// scheduler plans with the sequence's full length, pending tokens included;
// a pending token is fed as device.FromPrevious.
type Sequence struct {
	ID                uint64
	Tokens            []int32
	NumPromptTokens   int
	NumComputedTokens int
	// NumCachedTokens is how many prompt tokens the prefix cache served at the
	// first admission (later re-admissions after preemption do not change it).
	NumCachedTokens int
	NumPreemptions  int

	status        Status
	isAdmitted    bool // admitted at least once
	scheduledStep int64
	table         kvcache.Table

	maxTokens        int
	numPendingTokens int // sampled by dispatched steps, not yet appended
	numInFlightSteps int // dispatched steps that include the sequence, not yet completed
}

// NewSequence makes a waiting sequence for prompt that will generate at most
// maxTokens tokens. It copies the prompt into storage sized for the whole
// sequence, so appending generated tokens never allocates.
func NewSequence(id uint64, prompt []int32, maxTokens int) *Sequence {
	tokens := make([]int32, len(prompt), len(prompt)+maxTokens)
	copy(tokens, prompt)
	return &Sequence{ID: id, Tokens: tokens, NumPromptTokens: len(prompt), maxTokens: maxTokens}
}

// Append adds a generated token.
func (s *Sequence) Append(token int32) { s.Tokens = append(s.Tokens, token) }

// NumGeneratedTokens counts tokens after the prompt.
func (s *Sequence) NumGeneratedTokens() int { return len(s.Tokens) - s.NumPromptTokens }

// Status reports the sequence's state.
func (s *Sequence) Status() Status { return s.status }

// BlockTable is the sequence's KV block ids in position order; it is the
// table's own storage, valid until the scheduler next changes it.
func (s *Sequence) BlockTable() []int32 { return s.table.IDs() }

// numTokens is the sequence's length including tokens still on the device.
func (s *Sequence) numTokens() int { return len(s.Tokens) + s.numPendingTokens }

// numSampledTokens counts generated tokens including those still on the
// device: the index of the next token to draw.
func (s *Sequence) numSampledTokens() int { return s.NumGeneratedTokens() + s.numPendingTokens }

// numUncomputedTokens counts tokens whose KV is still to be written.
func (s *Sequence) numUncomputedTokens() int { return s.numTokens() - s.NumComputedTokens }

// isComplete reports whether every token the sequence may generate has been
// sampled (the last perhaps still on the device): planning it again would
// compute a token nobody can use.
func (s *Sequence) isComplete() bool { return s.numSampledTokens() >= s.maxTokens }

// isDecoding reports whether the sequence only needs its last sampled token
// fed: one token, one sample. A sequence recomputing after preemption is in
// prefill until it has caught up.
func (s *Sequence) isDecoding() bool {
	return s.numSampledTokens() > 0 && s.numUncomputedTokens() == 1
}
