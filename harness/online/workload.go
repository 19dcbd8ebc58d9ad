package online

import (
	"fmt"

	"github.com/roseinfer/roseinfer/engine/tokenizer"
	"github.com/roseinfer/roseinfer/harness/client"
	"github.com/roseinfer/roseinfer/harness/replay"
	"github.com/roseinfer/roseinfer/traces"
)

// Workload is the trace turned into requests: the same rows and prompt
// token ids for every backend and scale. bench online's profile stage
// replays the first rows of the same workload (Head).
type Workload struct {
	trace   *traces.Trace
	context traces.Context
	rows    []traces.Row // clamped, sorted by time
	prompts [][]int32
	warmup  []int32 // the warmup prompt: a prefix of the same base sequence
}

// LoadWorkload reads --trace (the first --n rows), clamps the rows to the
// context and the length limits, and builds every row's prompt and the
// warmup prompt.
func LoadWorkload(o *OnlineOptions) (*Workload, error) {
	format, err := traces.ParseFormat(o.TraceFormat)
	if err != nil {
		return nil, err
	}
	tr, err := traces.Load(o.TracePath, traces.Options{Format: format, N: o.N})
	if err != nil {
		return nil, err
	}
	if len(tr.Rows) == 0 {
		return nil, fmt.Errorf("trace %s has no rows", tr.Name)
	}
	ctx := traces.Context{
		ModelMaxLen:    o.ModelMaxLen,
		OverheadTokens: o.PromptOverheadTokens,
		MaxInputLen:    o.MaxInputLen,
		MaxOutputLen:   o.MaxOutputLen,
	}
	rows, err := ctx.ClampRows(tr.Rows)
	if err != nil {
		return nil, err
	}
	mode, err := traces.ParsePrefixMode(o.PrefixMode)
	if err != nil {
		return nil, err
	}
	popts := traces.PromptOptions{
		Mode:            mode,
		Seed:            o.Seed,
		VocabSize:       o.VocabSize,
		BlockSizeTokens: tr.Format.BlockSizeTokens(),
	}
	prompts, err := traces.BuildPrompts(rows, popts)
	if err != nil {
		return nil, fmt.Errorf("prompts for %s: %w", tr.Name, err)
	}
	// The warmup prompt is built the same way (same seed), so it is a
	// prefix of the base sequence, as in the original (C.6).
	warmLen := ctx.WarmupInputLen(o.WarmupInputLen, o.WarmupOutputLen)
	base, err := traces.BaseSequence(warmLen, o.Seed, o.VocabSize, nil)
	if err != nil {
		return nil, err
	}
	return &Workload{trace: tr, context: ctx, rows: rows, prompts: prompts, warmup: base}, nil
}

// Head is the workload cut to its first n rows (by time; all of them when
// there are fewer), with the same warmup.
func (w *Workload) Head(n int) *Workload {
	h := *w
	n = min(max(n, 0), len(w.rows))
	h.rows, h.prompts = w.rows[:n], w.prompts[:n]
	return &h
}

// promptText is the text of a token-id prompt, for servers (and the chat
// endpoint) that take text. As in the original, a prefix cut inside a word
// may re-tokenize to a slightly different length; servers that take ids get
// the ids themselves.
func promptText(ids []int32, q client.Quirks) (string, error) {
	if q.PromptAsTokenIDs && q.Endpoint != client.ChatCompletions {
		return "", nil
	}
	tok, err := tokenizer.Default()
	if err != nil {
		return "", fmt.Errorf("GPT-2 tokenizer for text prompts: %w", err)
	}
	return tok.Decode(ids), nil
}

// countTokens is the client's last-resort token counter (a server that sends
// only text): the GPT-2 tokenizer, so counts are approximate and marked so.
func countTokens(text string) int {
	tok, err := tokenizer.Default()
	if err != nil {
		return 1
	}
	return len(tok.Encode(text))
}

// Quirks is a backend's request shape with --endpoint applied.
func (o *OnlineOptions) Quirks(q client.Quirks) client.Quirks {
	if o.Endpoint == "chat" {
		q.Endpoint = client.ChatCompletions
	}
	return q
}

// body encodes one request with the run's sampling settings; text
// prompts are decoded from the ids where the request shape needs them.
func (o *OnlineOptions) body(model string, prompt []int32, maxTokens int, q client.Quirks) ([]byte, error) {
	text, err := promptText(prompt, q)
	if err != nil {
		return nil, err
	}
	return client.BuildBody(client.Params{
		Model:        model,
		PromptTokens: prompt,
		PromptText:   text,
		MaxTokens:    maxTokens,
		Temperature:  o.Temperature,
		TopP:         o.TopP,
		TopK:         o.TopK,
		IgnoreEOS:    o.IgnoreEOS,
	}, q)
}

// Bodies encodes every row's request for one backend; q is the backend's
// request shape (o.Quirks applied).
func (w *Workload) Bodies(o *OnlineOptions, model string, q client.Quirks) ([][]byte, error) {
	out := make([][]byte, len(w.rows))
	for i, r := range w.rows {
		b, err := o.body(model, w.prompts[i], r.OutputLen, q)
		if err != nil {
			return nil, fmt.Errorf("trace row %d: %w", r.Index, err)
		}
		out[i] = b
	}
	return out, nil
}

// WarmupBodies are the --warmup-requests identical warmup requests.
func (w *Workload) WarmupBodies(o *OnlineOptions, model string, q client.Quirks) ([][]byte, error) {
	if o.WarmupRequests == 0 {
		return nil, nil
	}
	b, err := o.body(model, w.warmup, max(1, o.WarmupOutputLen), q)
	if err != nil {
		return nil, fmt.Errorf("warmup request: %w", err)
	}
	out := make([][]byte, o.WarmupRequests)
	for i := range out {
		out[i] = b
	}
	return out, nil
}

// Items schedules the rows at one scale (trace times divided by it, plus
// offsetS), each carrying its body from Bodies.
func (w *Workload) Items(bodies [][]byte, scale, offsetS float64) ([]replay.Item, error) {
	at, err := traces.Schedule(w.rows, scale, offsetS)
	if err != nil {
		return nil, err
	}
	items := make([]replay.Item, len(w.rows))
	for i, r := range w.rows {
		items[i] = replay.Item{Index: r.Index, AtS: at[i], InputLen: r.InputLen, OutputLen: r.OutputLen, Body: bodies[i]}
	}
	return items, nil
}
