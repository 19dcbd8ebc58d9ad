package run

import (
	"fmt"

	"github.com/roseinfer/roseinfer/harness/client"
	"github.com/roseinfer/roseinfer/harness/replay"
	"github.com/roseinfer/roseinfer/traces"
)

// workload is the trace turned into requests: the same rows and prompt
// token ids for every backend and scale.
type workload struct {
	trace   *traces.Trace
	context traces.Context
	rows    []traces.Row // clamped, sorted by time
	prompts [][]int32
	warmup  []int32 // the warmup prompt: a prefix of the same base sequence
}

func loadWorkload(o *OnlineOptions) (*workload, error) {
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
	return &workload{trace: tr, context: ctx, rows: rows, prompts: prompts, warmup: base}, nil
}

// bodies encodes every row's request for one backend.
func (w *workload) bodies(o *OnlineOptions, model string, q client.Quirks) ([][]byte, error) {
	out := make([][]byte, len(w.rows))
	for i, r := range w.rows {
		b, err := client.BuildBody(client.Params{
			Model:        model,
			PromptTokens: w.prompts[i],
			MaxTokens:    r.OutputLen,
			Temperature:  o.Temperature,
			TopP:         o.TopP,
			TopK:         o.TopK,
			IgnoreEOS:    o.IgnoreEOS,
		}, q)
		if err != nil {
			return nil, fmt.Errorf("trace row %d: %w", r.Index, err)
		}
		out[i] = b
	}
	return out, nil
}

// warmupBodies are the --warmup-requests identical warmup requests.
func (w *workload) warmupBodies(o *OnlineOptions, model string, q client.Quirks) ([][]byte, error) {
	if o.WarmupRequests == 0 {
		return nil, nil
	}
	b, err := client.BuildBody(client.Params{
		Model:        model,
		PromptTokens: w.warmup,
		MaxTokens:    max(1, o.WarmupOutputLen),
		Temperature:  o.Temperature,
		TopP:         o.TopP,
		TopK:         o.TopK,
		IgnoreEOS:    o.IgnoreEOS,
	}, q)
	if err != nil {
		return nil, fmt.Errorf("warmup request: %w", err)
	}
	out := make([][]byte, o.WarmupRequests)
	for i := range out {
		out[i] = b
	}
	return out, nil
}

// items schedules the rows at one scale.
func (w *workload) items(bodies [][]byte, scale, offsetS float64) ([]replay.Item, error) {
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
