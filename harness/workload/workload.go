// Package workload turns a request trace into the requests a benchmark
// sends: it loads the trace, clamps the rows to the model's context and the
// length limits, builds every row's prompt token ids (the same for every
// backend and scale) and the warmup prompt, encodes request bodies for a
// backend's request shape, and schedules the rows at a load scale. bench
// online replays it; its profile stage replays the first rows (Head).
package workload

import (
	"fmt"

	"github.com/roseinfer/roseinfer/engine/tokenizer"
	"github.com/roseinfer/roseinfer/harness/client"
	"github.com/roseinfer/roseinfer/harness/replay"
	"github.com/roseinfer/roseinfer/traces"
)

// Options choose the trace, shape its prompts and set what every request
// asks for (bench online's workload flags).
type Options struct {
	TracePath            string // --trace; "" = the embedded Azure 2023 conversation trace
	TraceFormat          string // --trace-format; "" = detect
	N                    int    // --n: the first N rows of the trace
	MaxInputLen          int    // 0 = not set
	MaxOutputLen         int
	PromptOverheadTokens int
	// ModelDir is a checkpoint directory (--model DIR) or "": with one,
	// prompts are drawn from its tokenizer's regular tokens (ReadModel) and
	// an unset ModelMaxLen is its config.json's context.
	ModelDir    string
	ModelMaxLen int    // the model's context; 0 = ModelDir's config.json, else GPT-2's 1024
	VocabSize   int    // 0 = GPT-2's 50257; the range of GPT-2's draws (ModelDir's tokenizer decides otherwise)
	PrefixMode  string // base | trace
	Seed        int64
	// Arrivals is when rows arrive at scale 1: "" or "trace", the trace's
	// timestamps; "poisson", Poisson arrivals at 1 req/s drawn from Seed
	// (traces.PoissonArrivals), so scale 1/λ offers λ req/s.
	Arrivals string

	// Every request's sampling and route.
	Temperature float64
	TopP        float64
	TopK        int
	IgnoreEOS   bool
	Endpoint    string // completions (default) or chat

	// The warmup requests sent to each server before its first replay.
	WarmupRequests  int
	WarmupInputLen  int
	WarmupOutputLen int

	// Sessions, with NumSessions > 0, replaces the trace by synthetic
	// conversations (--sessions N --turns K ...).
	Sessions traces.SessionOptions
	// IndependentTurns (--independent-turns) replays a trace's later turns
	// as independent requests at their timestamps, as before sessions.
	IndependentTurns bool
}

// DefaultOptions are the workload every replay command starts from: the
// original's trace length, clamps and sampling (T 0.7, top-p 0.9, top-k 50),
// prompts of random GPT-2 ids under the model's context, and five
// sequential warmup requests of 128 -> 32 tokens.
func DefaultOptions() Options {
	return Options{
		N:                    1000,
		MaxOutputLen:         128,
		PromptOverheadTokens: 8,
		ModelMaxLen:          0, // the model's: --model DIR's config.json, else GPT-2's 1024
		VocabSize:            GPT2VocabSize,
		PrefixMode:           "base",
		Seed:                 42,
		Temperature:          0.7,
		TopP:                 0.9,
		TopK:                 50,
		WarmupRequests:       5,
		WarmupInputLen:       128,
		WarmupOutputLen:      32,
	}
}

// GPT-2's context and vocabulary: the defaults without a checkpoint
// directory (the built-in tiny model keeps both).
const (
	GPT2ContextLen = 1024
	GPT2VocabSize  = 50257
)

// Context is the model context the rows are clamped to, for a model of
// contextLen tokens when ModelMaxLen is unset (0: GPT-2's).
func (o *Options) Context(contextLen int) traces.Context {
	maxLen := o.ModelMaxLen
	if maxLen <= 0 {
		maxLen = contextLen
	}
	if maxLen <= 0 {
		maxLen = GPT2ContextLen
	}
	return traces.Context{
		ModelMaxLen:    maxLen,
		OverheadTokens: o.PromptOverheadTokens,
		MaxInputLen:    o.MaxInputLen,
		MaxOutputLen:   o.MaxOutputLen,
	}
}

// Workload is the trace turned into requests: the same rows and prompt
// token ids for every backend and scale.
type Workload struct {
	trace   *traces.Trace
	context traces.Context
	rows    []traces.Row // clamped, sorted by time
	prompts [][]int32    // a session's later turns: an independent prompt, sent only by Run
	warmup  []int32      // the warmup prompt: a prefix of the same base sequence
	model   *Model       // nil without a checkpoint directory
	// implied is each row's prefix shared with an earlier prompt of the
	// replay (sharedPrefixes); -1 for a session's later turns, whose
	// history is known only when they are sent.
	implied  []int
	sessions *sessions // nil: every row is an independent request
}

// Load reads --trace (the first --n rows), clamps the rows to the
// context and the length limits, and builds every row's prompt and the
// warmup prompt.
func Load(o *Options) (*Workload, error) {
	format, err := traces.ParseFormat(o.TraceFormat)
	if err != nil {
		return nil, err
	}
	tr, err := loadTrace(o, format)
	if err != nil {
		return nil, err
	}
	if len(tr.Rows) == 0 {
		return nil, fmt.Errorf("trace %s has no rows", tr.Name)
	}
	var m *Model
	contextLen, vocab, tokenIDs := 0, o.VocabSize, []int32(nil)
	if o.ModelDir != "" {
		if m, err = ReadModel(o.ModelDir); err != nil {
			return nil, err
		}
		contextLen, tokenIDs = m.ContextLen, m.TokenIDs
	}
	if vocab <= 0 {
		vocab = GPT2VocabSize
	}
	ctx := o.Context(contextLen)
	rows, err := ctx.ClampRows(tr.Rows)
	if err != nil {
		return nil, err
	}
	var sess *sessions
	var newLens []int
	if !o.IndependentTurns && traces.HasSessions(tr.Rows) {
		rows, sess, newLens = planSessions(tr.Rows, rows, ctx)
		if sess.numDropped > 0 && tr.Format == traces.FormatSessions {
			return nil, fmt.Errorf("--sessions: a session's last turn needs %d prompt tokens and %d output tokens, "+
				"more than the %d the context allows (--model-max-len, --prompt-overhead-tokens); lower --turns, "+
				"--session-input-len, --session-turn-input-len or --session-output-len",
				o.Sessions.LastPromptLen(), o.Sessions.OutputLen, ctx.Effective())
		}
	}
	switch o.Arrivals {
	case "", "trace":
	case "poisson":
		// A later turn goes out a think time after its answer, not at a
		// timestamp of its own, so Poisson times would only move the first
		// turns and the offered rate would not be the nominal one.
		if sess != nil {
			return nil, fmt.Errorf("poisson arrivals (--rate-mode) replace every request's time, but the workload (%s) replays as sessions "+
				"whose later turns follow their answers: search its time scale (no --rate-mode) or pass --independent-turns", tr.Name)
		}
		rows = traces.PoissonArrivals(rows, o.Seed)
	default:
		return nil, fmt.Errorf("arrivals %q: want trace or poisson", o.Arrivals)
	}
	mode, err := traces.ParsePrefixMode(o.PrefixMode)
	if err != nil {
		return nil, err
	}
	popts := traces.PromptOptions{
		Mode:            mode,
		Seed:            o.Seed,
		VocabSize:       vocab,
		BlockSizeTokens: tr.Format.BlockSizeTokens(),
		TokenIDs:        tokenIDs,
	}
	var prompts [][]int32
	if tr.Format == traces.FormatSessions {
		prompts = uniquePrompts(rows, popts)
	} else if prompts, err = traces.BuildPrompts(rows, popts); err != nil {
		return nil, fmt.Errorf("prompts for %s: %w", tr.Name, err)
	}
	implied := sharedPrefixes(prompts, func(i int) bool { return sess != nil && sess.parent[i] >= 0 })
	if sess != nil {
		sess.newInput = make([][]int32, len(rows))
		for i, n := range newLens {
			if n > 0 {
				sess.newInput[i] = uniquePrompt(traces.Row{Index: rows[i].Index, InputLen: n}, popts)
			}
		}
	}
	// The warmup prompt is built the same way (same seed), so it is a
	// prefix of the base sequence, as in the original.
	warmLen := ctx.WarmupInputLen(o.WarmupInputLen, o.WarmupOutputLen)
	if tokenIDs != nil {
		vocab = len(tokenIDs)
	}
	base, err := traces.BaseSequence(warmLen, o.Seed, vocab, nil)
	if err != nil {
		return nil, err
	}
	return &Workload{trace: tr, context: ctx, rows: rows, prompts: prompts,
		warmup: traces.MapTokenIDs(base, tokenIDs), model: m, implied: implied, sessions: sess}, nil
}

// loadTrace reads --trace, or generates --sessions' conversations.
func loadTrace(o *Options, format traces.Format) (*traces.Trace, error) {
	if o.Sessions.NumSessions == 0 {
		return traces.Load(o.TracePath, traces.Options{Format: format, N: o.N})
	}
	if o.TracePath != "" {
		return nil, fmt.Errorf("--sessions makes its own conversations: it cannot replay --trace %s as well", o.TracePath)
	}
	return traces.SyntheticSessions(o.Sessions)
}

// uniquePrompts gives every row a prompt of its own (synthetic sessions: no
// conversation shares a prefix with another).
func uniquePrompts(rows []traces.Row, popts traces.PromptOptions) [][]int32 {
	out := make([][]int32, len(rows))
	for i, r := range rows {
		out[i] = uniquePrompt(r, popts)
	}
	return out
}

// uniquePrompt is r.InputLen ids drawn for r.Index alone: a trace prompt
// without hash ids, mapped to the tokenizer's regular ids when there is a
// table.
func uniquePrompt(r traces.Row, popts traces.PromptOptions) []int32 {
	r.HashIDs = nil
	vocab := popts.VocabSize
	if popts.TokenIDs != nil {
		vocab = len(popts.TokenIDs)
	}
	return traces.MapTokenIDs(traces.TracePrompt(r, 0, popts.Seed, vocab), popts.TokenIDs)
}

// Trace is the trace the workload was read from.
func (w *Workload) Trace() *traces.Trace { return w.trace }

// NumRows is how many rows the workload replays.
func (w *Workload) NumRows() int { return len(w.rows) }

// MeanRate is the rows' mean arrival rate at scale 1 in req/s
// (traces.MeanRate): scale s offers MeanRate / s. 0 when the rows span no
// time. With poisson arrivals it is exactly 1.
func (w *Workload) MeanRate() float64 { return traces.MeanRate(w.rows) }

// Context is the model context the rows were clamped to.
func (w *Workload) Context() traces.Context { return w.context }

// Head is the workload cut to its first n rows (by time; all of them when
// there are fewer), with the same warmup.
func (w *Workload) Head(n int) *Workload {
	h := *w
	n = min(max(n, 0), len(w.rows))
	h.rows, h.prompts, h.implied = w.rows[:n], w.prompts[:n], w.implied[:n]
	return &h
}

// Prompts are every row's prompt token ids, in row order (shared slices:
// do not modify).
func (w *Workload) Prompts() [][]int32 { return w.prompts }

// promptText is the text of a token-id prompt, for servers (and the chat
// endpoint) that take text, in the model's tokenizer (GPT-2's without a
// checkpoint directory). As in the original, a prefix cut inside a word
// may re-tokenize to a slightly different length; servers that take ids get
// the ids themselves.
func (w *Workload) promptText(ids []int32, q client.Quirks) (string, error) {
	if q.PromptAsTokenIDs && q.Endpoint != client.ChatCompletions {
		return "", nil
	}
	return w.textOf(ids)
}

// tokenizer is the prompts' tokenizer: the checkpoint's, else GPT-2's.
func (w *Workload) tokenizer() (*tokenizer.Tokenizer, error) {
	if w.model != nil {
		return w.model.Tokenizer, nil
	}
	tok, err := tokenizer.Default()
	if err != nil {
		return nil, fmt.Errorf("GPT-2 tokenizer for text prompts: %w", err)
	}
	return tok, nil
}

// textOf decodes ids with the prompts' tokenizer.
func (w *Workload) textOf(ids []int32) (string, error) {
	tok, err := w.tokenizer()
	if err != nil {
		return "", err
	}
	return tok.Decode(ids), nil
}

// decode is textOf for ids whose tokenizer already decoded a prompt (a
// session's first turn): it cannot fail then.
func (w *Workload) decode(ids []int32) string {
	text, _ := w.textOf(ids)
	return text
}

// encode tokenizes an answer that came without token ids (approximate: the
// server's tokenizer may differ); nil if there is no tokenizer.
func (w *Workload) encode(text string) []int32 {
	tok, err := w.tokenizer()
	if err != nil {
		return nil
	}
	return tok.Encode(text)
}

// CountTokens is the client's last-resort token counter (a server that sends
// only text): the GPT-2 tokenizer, so counts are approximate and marked so.
func CountTokens(text string) int {
	tok, err := tokenizer.Default()
	if err != nil {
		return 1
	}
	return len(tok.Encode(text))
}

// Quirks is a backend's request shape with --endpoint applied.
func (o *Options) Quirks(q client.Quirks) client.Quirks {
	if o.Endpoint == "chat" {
		q.Endpoint = client.ChatCompletions
	}
	return q
}

// body encodes one request with the run's sampling settings; text
// prompts are decoded from the ids where the request shape needs them.
func (w *Workload) body(o *Options, model string, prompt []int32, maxTokens int, q client.Quirks) ([]byte, error) {
	text, err := w.promptText(prompt, q)
	if err != nil {
		return nil, err
	}
	p := o.params(model, maxTokens)
	p.PromptTokens, p.PromptText = prompt, text
	return client.BuildBody(p, q)
}

// params are a request's settings but its prompt.
func (o *Options) params(model string, maxTokens int) client.Params {
	return client.Params{
		Model:       model,
		MaxTokens:   maxTokens,
		Temperature: o.Temperature,
		TopP:        o.TopP,
		TopK:        o.TopK,
		IgnoreEOS:   o.IgnoreEOS,
	}
}

// Bodies encodes every row's request for one backend; q is the backend's
// request shape (o.Quirks applied).
func (w *Workload) Bodies(o *Options, model string, q client.Quirks) ([][]byte, error) {
	out := make([][]byte, len(w.rows))
	for i, r := range w.rows {
		b, err := w.body(o, model, w.prompts[i], r.OutputLen, q)
		if err != nil {
			return nil, fmt.Errorf("trace row %d: %w", r.Index, err)
		}
		out[i] = b
	}
	return out, nil
}

// WarmupBodies are the --warmup-requests identical warmup requests.
func (w *Workload) WarmupBodies(o *Options, model string, q client.Quirks) ([][]byte, error) {
	if o.WarmupRequests == 0 {
		return nil, nil
	}
	b, err := w.body(o, model, w.warmup, max(1, o.WarmupOutputLen), q)
	if err != nil {
		return nil, fmt.Errorf("warmup request: %w", err)
	}
	out := make([][]byte, o.WarmupRequests)
	for i := range out {
		out[i] = b
	}
	return out, nil
}

// Items schedules the rows at one scale (trace times multiplied by it, plus
// offsetS), each carrying its body from Bodies and the prefix it shares
// with an earlier prompt. In a session workload each item also carries its
// turn: replay.RunSessions sends a later turn its scaled think time after
// the turn it continues, with the body Conversations builds (replay.Run
// sends it at its own time with its Bodies body, as an independent request).
func (w *Workload) Items(bodies [][]byte, scale, offsetS float64) ([]replay.Item, error) {
	at, err := traces.Schedule(w.rows, scale, offsetS)
	if err != nil {
		return nil, err
	}
	items := make([]replay.Item, len(w.rows))
	for i, r := range w.rows {
		items[i] = replay.Item{Index: r.Index, AtS: at[i], InputLen: r.InputLen, OutputLen: r.OutputLen, Body: bodies[i]}
		if n := w.implied[i]; n >= 0 {
			items[i].ImpliedTokens = &n
		}
		if s := w.sessions; s != nil {
			items[i].Session = &replay.Turn{Number: s.turn[i], Parent: s.parent[i], GapS: s.gapS[i] * scale}
		}
	}
	return items, nil
}
