package tokenizer

// Detokenizer turns a stream of generated ids into text pieces for streaming.
// A GPT-2 token can hold part of a UTF-8 character (ids 0..255 are single
// bytes; " 🤖" is ids 12520, 97, 244), so bytes that may still become a character
// wait for the next token: nothing emitted is ever half a character. The pieces
// of Add followed by Flush concatenate to exactly Decode(ids).
//
// It is on the server's per-token path: a token whose bytes are whole text on
// their own, with nothing pending, is returned as a substring of the
// vocabulary without allocating. A Detokenizer is not safe for concurrent use.
type Detokenizer struct {
	tok     *Tokenizer
	pending []byte // a truncated character (at most 3 bytes) awaiting more
}

// NewDetokenizer returns a detokenizer for one output stream.
func (t *Tokenizer) NewDetokenizer() *Detokenizer {
	return &Detokenizer{tok: t, pending: make([]byte, 0, 8)}
}

// Add consumes one generated id and returns the text it completes, possibly "".
// Ids outside the vocabulary add nothing, as in Decode.
func (d *Detokenizer) Add(id int32) string {
	text := d.tok.tokenBytes(id)
	if len(d.pending) == 0 && d.tok.isWholeText(id) {
		return text
	}
	d.pending = append(d.pending, text...)
	n := completeLen(d.pending)
	if n == 0 {
		return ""
	}
	out := string(appendLossy(make([]byte, 0, n+3), d.pending[:n]))
	d.pending = d.pending[:copy(d.pending, d.pending[n:])]
	return out
}

// Flush returns what is still pending at the end of the stream, each
// truncated character as U+FFFD (HF's decode with errors="replace"), and
// leaves the detokenizer empty and reusable.
func (d *Detokenizer) Flush() string {
	if len(d.pending) == 0 {
		return ""
	}
	out := string(appendLossy(nil, d.pending))
	d.pending = d.pending[:0]
	return out
}
