package server

import (
	"bytes"

	"github.com/roseinfer/roseinfer/engine"
	"github.com/roseinfer/roseinfer/engine/tokenizer"
)

// choice follows one prompt's generation: it detokenizes the engine's
// outputs, finds stop strings, and holds what the next chunk carries (for a
// non-streaming request, the whole answer).
//
// Stop strings are matched on text, so text that could be the start of a stop
// string is held back until the next token decides: the tail of pending
// (heldBytes long) is never sent before that. When a stop string matches, the
// text is cut before it and the engine request is aborted.
type choice struct {
	index  int
	stream Stream
	detok  *tokenizer.Detokenizer
	eos    int32
	stops  [][]byte

	numPromptTokens int
	numTokens       int // generated tokens consumed, including EOS and the token that hit a stop string
	finish          engine.FinishReason
	done            bool // finish is known; later outputs are ignored
	closed          bool // the engine closed the outputs channel (Timing is valid)
	emitted         bool // the final chunk or response part was produced
	numChunks       int  // streamed chunks sent

	// What the next chunk carries.
	pending   []byte // text; its last heldBytes are not sendable yet
	heldBytes int
	tokenIDs  []int32
	logprobs  []float32
	pieces    []string // each token's own text (logprobs "tokens")
	offsets   []int    // each token's text offset in the completion (logprobs "text_offset")

	numDecodedBytes int // text bytes produced by the detokenizer so far
	wantLogprobs    bool
}

func newChoice(index int, st Stream, detok *tokenizer.Detokenizer, eos int32, stops [][]byte, numPromptTokens int, wantLogprobs bool) *choice {
	return &choice{index: index, stream: st, detok: detok, eos: eos, stops: stops,
		numPromptTokens: numPromptTokens, wantLogprobs: wantLogprobs}
}

// add consumes one engine output. It reports whether the choice has just
// finished (finish is set and the caller should send what is pending).
func (c *choice) add(out engine.Output) (finished bool) {
	if c.done {
		return false
	}
	if out.Token >= 0 {
		c.addToken(out)
	}
	if c.done { // a stop string matched
		return true
	}
	if out.Finished != engine.NotFinished {
		c.finishText()
		if !c.done {
			c.finish, c.done = out.Finished, true
		}
		return true
	}
	return false
}

func (c *choice) addToken(out engine.Output) {
	c.numTokens++
	c.tokenIDs = append(c.tokenIDs, out.Token)
	// EOS ends the text; it is counted and listed but never decoded (vLLM
	// skips special tokens the same way), nor is any other stop id that
	// ended the generation (Qwen3's <|endoftext|> beside its EOS <|im_end|>):
	// the engine finishes with FinishStop only on such a token.
	piece := ""
	if out.Token != c.eos && out.Finished != engine.FinishStop {
		piece = c.detok.Add(out.Token)
	}
	if c.wantLogprobs {
		c.logprobs = append(c.logprobs, out.Logprob)
		c.pieces = append(c.pieces, piece)
		c.offsets = append(c.offsets, c.numDecodedBytes)
	}
	c.numDecodedBytes += len(piece)
	c.appendText(piece)
}

// finishText flushes the detokenizer's tail and releases held text.
func (c *choice) finishText() {
	c.appendText(c.detok.Flush())
	c.heldBytes = 0
}

// appendText adds decoded text and applies the stop strings to it.
func (c *choice) appendText(piece string) {
	if piece == "" && c.heldBytes == 0 {
		return
	}
	searchFrom := len(c.pending) - c.heldBytes
	c.pending = append(c.pending, piece...)
	if len(c.stops) == 0 {
		return
	}
	tail := c.pending[searchFrom:]
	if at := firstStop(tail, c.stops); at >= 0 {
		c.pending = c.pending[:searchFrom+at]
		c.heldBytes = 0
		c.finish, c.done = engine.FinishStop, true
		c.stream.Abort()
		return
	}
	c.heldBytes = longestStopPrefixSuffix(tail, c.stops)
}

// firstStop returns where the earliest stop string starts in text, or -1.
func firstStop(text []byte, stops [][]byte) int {
	at := -1
	for _, s := range stops {
		if i := bytes.Index(text, s); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	return at
}

// longestStopPrefixSuffix is the length of the longest suffix of text that is
// a proper prefix of a stop string: text that must wait for more tokens.
func longestStopPrefixSuffix(text []byte, stops [][]byte) int {
	longest := 0
	for _, s := range stops {
		for n := min(len(s)-1, len(text)); n > longest; n-- {
			if bytes.Equal(text[len(text)-n:], s[:n]) {
				longest = n
				break
			}
		}
	}
	return longest
}

// sendableText is the text the next chunk may carry.
func (c *choice) sendableText() []byte { return c.pending[:len(c.pending)-c.heldBytes] }

// hasTokens reports whether tokens arrived since the last chunk.
func (c *choice) hasTokens() bool { return len(c.tokenIDs) > 0 }

// sent clears what a chunk carried, keeping held-back text.
func (c *choice) sent() {
	n := len(c.pending) - c.heldBytes
	c.pending = append(c.pending[:0], c.pending[n:]...)
	c.tokenIDs = c.tokenIDs[:0]
	c.logprobs = c.logprobs[:0]
	c.pieces = c.pieces[:0]
	c.offsets = c.offsets[:0]
}

// finishReason is the OpenAI name of why the choice ended. An abort that the
// server did not ask for (shutdown) or a device error is not a normal finish.
func (c *choice) finishReason() string { return c.finish.String() }
