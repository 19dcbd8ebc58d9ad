package engine

// This file is the engine's public surface: what engine/server and the
// harness's in-process offline runner use. engine.go holds the loop.

import (
	"errors"
	"time"

	"github.com/roseinfer/roseinfer/engine/profile/phase"
	"github.com/roseinfer/roseinfer/engine/sample"
)

// Config holds the scheduler and KV cache limits. Zero values are replaced by
// the defaults below in New.
type Config struct {
	MaxNumSeqs          int  // sequences per step (original --max-batch-size); default 256
	MaxNumBatchedTokens int  // token budget per step (decode + prefill chunks); default 2048
	PrefillChunkSize    int  // max prompt tokens of one sequence per step; default 256
	ChunkedPrefill      bool // false: a prompt is prefilled in one step (budget permitting)
	BlockSizeTokens     int  // default 16
	NumBlocks           int  // KV pool size in blocks; must be set
	PrefixCache         bool
	MaxPending          int // waiting requests beyond this are rejected with ErrOverloaded; 0 = unlimited
	MaxModelLen         int // context length (n_positions)
	EOSToken            int32
	// StopTokens are further ids that end a request like EOSToken (for
	// Qwen3, generation_config.json's <|endoftext|> beside <|im_end|>);
	// ignore_eos disables them too. Only EOSToken is banned on the device
	// before min_tokens (device.Seq bans one id): a stop token sampled
	// earlier is kept as an ordinary token and does not end the request.
	StopTokens []int32
	// OverlapSchedule plans and submits step N+1 while step N runs, when the
	// device is a device.AsyncDevice; other devices run synchronously.
	OverlapSchedule bool
	// Observer, when set, is told when each phase of a step begins and ends
	// (engine/profile's recorder, NVTX ranges); nil costs one comparison
	// per phase.
	Observer phase.Observer
}

// Request is one generation request in token ids; the server tokenizes.
type Request struct {
	PromptTokens []int32
	Params       sample.Params
	HasSeed      bool // false: the engine draws Params.Seed at random
	MaxTokens    int  // >= 1
	MinTokens    int  // EOS is banned until this many tokens exist
	IgnoreEOS    bool
	WantLogprobs bool
}

// FinishReason says why a sequence ended.
type FinishReason uint8

const (
	NotFinished  FinishReason = iota
	FinishLength              // max_tokens reached (OpenAI "length")
	FinishStop                // EOS or a stop string (OpenAI "stop")
	FinishAbort               // aborted by the client or shutdown
	FinishError               // the device failed
)

func (r FinishReason) String() string {
	switch r {
	case FinishLength:
		return "length"
	case FinishStop:
		return "stop"
	case FinishAbort:
		return "abort"
	case FinishError:
		return "error"
	}
	return ""
}

// Output is one event of a stream: one generated token, and/or the end. It is
// a small value so the step loop sends it without allocating.
type Output struct {
	Token    int32 // -1 when the event carries no token (abort, error)
	Logprob  float32
	Finished FinishReason
	At       time.Time // when the engine emitted it (monotonic)
}

// Timing is the server-side record of one request, for return_server_timing.
// All instants are monotonic; the server reports them relative to Arrival.
type Timing struct {
	Arrival         time.Time   // Submit was called
	FirstScheduled  time.Time   // first step that included the request
	Tokens          []time.Time // emission instant of each generated token
	Finished        time.Time
	NumPreemptions  int
	NumCachedTokens int // prompt tokens served from the prefix cache
}

// Stats is a snapshot for /metrics.
type Stats struct {
	NumRunning, NumWaiting     int
	KVBlocksUsed, KVBlocksFree int
	PrefixQueriedTokens        int64 // prompt tokens looked up in the prefix cache
	PrefixHitTokens            int64 // of those, found
	NumPreemptions             int64
	NumSteps                   int64
}

// Errors returned by Submit; the server maps them to HTTP statuses.
var (
	ErrOverloaded = errors.New("engine: too many pending requests")              // 429
	ErrTooLong    = errors.New("engine: prompt + max_tokens exceed the context") // 400
	ErrClosed     = errors.New("engine: closed")                                 // 503
)
