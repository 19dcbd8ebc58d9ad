package client

import (
	"time"

	"github.com/roseinfer/roseinfer/results"
)

// Chunk is one token-carrying chunk of a stream.
type Chunk struct {
	At     time.Time // arrival of its last byte (monotonic)
	Tokens int       // generated tokens it carried (>= 1)
	Text   string
}

// CountSource says how the tokens per chunk were known, best first.
type CountSource string

const (
	CountNone        CountSource = ""                 // no token-carrying chunk
	CountTokenIDs    CountSource = "token_ids"        // choices[0].token_ids
	CountUsage       CountSource = "continuous_usage" // cumulative usage in every chunk
	CountServerTotal CountSource = "server_total"     // final usage = number of text chunks, so one each
	CountTokenizer   CountSource = "tokenizer"        // chunk text re-tokenized client-side (approximate)
	CountChunks      CountSource = "chunks"           // nothing better: one per text chunk (inexact)
)

// Result is one request as the client saw it.
type Result struct {
	Called                time.Time // Start (or Do) was entered
	Sent                  time.Time // t_0: the request's write to the socket returned (Called if never written)
	End                   time.Time // [DONE], connection close or failure
	Chunks                []Chunk
	Status                int
	FinishReason          string
	UsagePromptTokens     int // -1 when the server sent no usage
	UsageCompletionTokens int // -1 when the server sent no usage
	// UsageCachedTokens is usage.prompt_tokens_details.cached_tokens: the
	// prompt tokens the server's prefix cache supplied; -1 when not sent.
	UsageCachedTokens int
	// TokenIDs are the generated ids the chunks listed, in order, when
	// Options.KeepTokenIDs is set (nil when the server lists none).
	TokenIDs     []int32
	ServerTiming *results.ServerTiming
	CountSource  CountSource
	Err          error
	ErrKind      string
	Retries      int // attempts after the first (0 or 1): see Client.Do
}

func (r *Result) fail(kind string, err error) {
	if r.Err == nil {
		r.Err, r.ErrKind = err, kind
	}
}

// NumTokens is the number of generated tokens received.
func (r *Result) NumTokens() int {
	n := 0
	for _, c := range r.Chunks {
		n += c.Tokens
	}
	return n
}

// Text is the generated text received.
func (r *Result) Text() string {
	n := 0
	for _, c := range r.Chunks {
		n += len(c.Text)
	}
	b := make([]byte, 0, n)
	for _, c := range r.Chunks {
		b = append(b, c.Text...)
	}
	return string(b)
}

// Fill writes the raw fields of rec from r. roundStart is the replay's time
// origin; start_s and end_s are relative to it, chunk_s to start_s.
// Derived figures (TTFT, TPOT, E2E) are left to harness/metrics.
func (r *Result) Fill(rec *results.Request, roundStart time.Time) {
	rec.StartS = r.Sent.Sub(roundStart).Seconds()
	rec.EndS = r.End.Sub(roundStart).Seconds()
	rec.ChunkS = make([]float64, len(r.Chunks))
	rec.ChunkTokens = make([]int, len(r.Chunks))
	for i, c := range r.Chunks {
		rec.ChunkS[i] = c.At.Sub(r.Sent).Seconds()
		rec.ChunkTokens[i] = c.Tokens
	}
	rec.NumOutputTokens = r.NumTokens()
	rec.NumStreamEvents = len(r.Chunks)
	rec.HTTPStatus = r.Status
	rec.Error, rec.ErrorKind = nil, ""
	if r.Err != nil {
		msg := r.Err.Error()
		rec.Error, rec.ErrorKind = &msg, r.ErrKind
	}
	rec.UsagePromptTokens, rec.UsageCompletionTokens = nil, nil
	if r.UsagePromptTokens >= 0 {
		v := r.UsagePromptTokens
		rec.UsagePromptTokens = &v
	}
	if r.UsageCompletionTokens >= 0 {
		v := r.UsageCompletionTokens
		rec.UsageCompletionTokens = &v
	}
	rec.UsageCachedTokens = nil
	if r.UsageCachedTokens >= 0 {
		v := r.UsageCachedTokens
		rec.UsageCachedTokens = &v
	}
	rec.ServerTiming = r.ServerTiming
	rec.TokenCountSource = string(r.CountSource)
	rec.Retries = r.Retries
}

// tokenCounter turns chunks into token events. A chunk's count comes from
// its token ids, else from the growth of cumulative usage; a text chunk with
// neither is held as unknown (-1) and resolved when the stream ends.
// Chunks that carry no tokens (role-only openers, usage-only, finish-only)
// are not events.
//
// Usage counts per chunk only when it is continuous, i.e. the first chunk
// with choices already carried it; llama-server, for one, puts the total in
// its last content chunk only, which must not be read as that chunk's count.
type tokenCounter struct {
	prevUsage  int
	numUnknown int
	sources    [2]bool // token ids, usage
	seenChoice bool
	continuous bool
}

func (tc *tokenCounter) add(res *Result, ck chunk, at time.Time) {
	if ck.usageCompletion >= 0 {
		res.UsageCompletionTokens = ck.usageCompletion
	}
	if ck.usagePrompt >= 0 {
		res.UsagePromptTokens = ck.usagePrompt
	}
	if ck.usageCached >= 0 {
		res.UsageCachedTokens = ck.usageCached
	}
	if ck.serverTiming != nil {
		res.ServerTiming = ck.serverTiming
	}
	if ck.finishReason != "" {
		res.FinishReason = ck.finishReason
	}
	if !ck.hasChoices {
		return
	}
	if !tc.seenChoice {
		tc.seenChoice = true
		tc.continuous = ck.usageCompletion >= 0
	}
	k := -1
	switch {
	case ck.tokenIDs >= 0:
		k = ck.tokenIDs
		tc.sources[0] = true
	case ck.usageCompletion >= 0 && tc.continuous:
		k = ck.usageCompletion - tc.prevUsage
		tc.sources[1] = true
	}
	if ck.usageCompletion >= 0 {
		tc.prevUsage = ck.usageCompletion
	}
	switch {
	case k > 0:
		res.Chunks = append(res.Chunks, Chunk{At: at, Tokens: k, Text: ck.text})
	case k < 0 && ck.text != "":
		res.Chunks = append(res.Chunks, Chunk{At: at, Tokens: -1, Text: ck.text})
		tc.numUnknown++
	}
}

// resolve fixes the unknown counts and sets res.CountSource to the weakest
// source used.
func (tc *tokenCounter) resolve(res *Result, countTokens func(string) int) {
	switch {
	case tc.sources[1]:
		res.CountSource = CountUsage
	case tc.sources[0]:
		res.CountSource = CountTokenIDs
	}
	if tc.numUnknown == 0 {
		return
	}
	known := 0
	for _, c := range res.Chunks {
		if c.Tokens > 0 {
			known += c.Tokens
		}
	}
	source := CountChunks
	switch {
	case res.UsageCompletionTokens >= 0 && res.UsageCompletionTokens-known == tc.numUnknown:
		source = CountServerTotal
	case countTokens != nil:
		source = CountTokenizer
	}
	for i := range res.Chunks {
		if res.Chunks[i].Tokens >= 0 {
			continue
		}
		n := 1
		if source == CountTokenizer {
			n = max(1, countTokens(res.Chunks[i].Text))
		}
		res.Chunks[i].Tokens = n
	}
	res.CountSource = source
}
