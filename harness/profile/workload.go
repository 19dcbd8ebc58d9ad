package profile

import (
	"fmt"

	"github.com/roseinfer/roseinfer/harness/client"
	"github.com/roseinfer/roseinfer/harness/replay"
	"github.com/roseinfer/roseinfer/harness/run"
	"github.com/roseinfer/roseinfer/traces"
)

// workload is what every profiled server runs: its warmup requests, then
// requests sent at their scheduled times. It encodes bodies per server
// (model id and request quirks differ).
type workload interface {
	warmupBodies(model string, q client.Quirks) ([][]byte, error)
	items(model string, q client.Quirks) ([]replay.Item, error)
}

// onlineWorkload is the benchmark's trace rebuilt for profiling (F.1): the
// same rows, prompts and warmup, with --profile-output-len as the output
// clamp, scheduled at --profile-scale, cut to the first --profile-n rows
// by time.
type onlineWorkload struct {
	o       *run.OnlineOptions
	rows    []traces.Row
	prompts [][]int32
	atS     []float64
	warmup  []int32
}

func newOnlineWorkload(o *run.OnlineOptions, p *Options) (*onlineWorkload, error) {
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
	outLen := p.OutputLen
	if outLen == 0 {
		outLen = o.MaxOutputLen
	}
	tctx := traces.Context{ModelMaxLen: o.ModelMaxLen, OverheadTokens: o.PromptOverheadTokens,
		MaxInputLen: o.MaxInputLen, MaxOutputLen: outLen}
	rows, err := tctx.ClampRows(tr.Rows)
	if err != nil {
		return nil, err
	}
	mode, err := traces.ParsePrefixMode(o.PrefixMode)
	if err != nil {
		return nil, err
	}
	// Prompts are built for every row, as the benchmark did, so the
	// profiled requests carry the very prompts that were measured.
	prompts, err := traces.BuildPrompts(rows, traces.PromptOptions{Mode: mode, Seed: o.Seed, VocabSize: o.VocabSize,
		BlockSizeTokens: tr.Format.BlockSizeTokens()})
	if err != nil {
		return nil, fmt.Errorf("prompts for %s: %w", tr.Name, err)
	}
	n := min(p.N, len(rows))
	w := &onlineWorkload{o: o, rows: rows[:n], prompts: prompts[:n]}
	if w.atS, err = traces.Schedule(w.rows, p.Scale, o.StartOffsetS); err != nil {
		return nil, err
	}
	warmLen := tctx.WarmupInputLen(o.WarmupInputLen, o.WarmupOutputLen)
	if w.warmup, err = traces.BaseSequence(warmLen, o.Seed, o.VocabSize, nil); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *onlineWorkload) params(model string, prompt []int32, maxTokens int) client.Params {
	o := w.o
	return client.Params{Model: model, PromptTokens: prompt, MaxTokens: maxTokens, Temperature: o.Temperature,
		TopP: o.TopP, TopK: o.TopK, IgnoreEOS: o.IgnoreEOS}
}

func (w *onlineWorkload) warmupBodies(model string, q client.Quirks) ([][]byte, error) {
	if w.o.WarmupRequests == 0 {
		return nil, nil
	}
	b, err := client.BuildBody(w.params(model, w.warmup, max(1, w.o.WarmupOutputLen)), q)
	if err != nil {
		return nil, fmt.Errorf("warmup request: %w", err)
	}
	out := make([][]byte, w.o.WarmupRequests)
	for i := range out {
		out[i] = b
	}
	return out, nil
}

func (w *onlineWorkload) items(model string, q client.Quirks) ([]replay.Item, error) {
	items := make([]replay.Item, len(w.rows))
	for i, r := range w.rows {
		b, err := client.BuildBody(w.params(model, w.prompts[i], r.OutputLen), q)
		if err != nil {
			return nil, fmt.Errorf("trace row %d: %w", r.Index, err)
		}
		items[i] = replay.Item{Index: r.Index, AtS: w.atS[i], InputLen: r.InputLen, OutputLen: r.OutputLen, Body: b}
	}
	return items, nil
}
