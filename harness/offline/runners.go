package offline

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/roseinfer/roseinfer/harness/backend"
	"github.com/roseinfer/roseinfer/harness/client"
	"github.com/roseinfer/roseinfer/results"
)

// batchTiming is one timed batch: when it started, when every prompt had its
// first token, and when the last token arrived; plus the token totals.
type batchTiming struct {
	start, prefillEnd, end           time.Time
	totalInputTokens, totalOutTokens int
}

// result turns a timed batch into the offline figures (docs/METRICS.md,
// "Offline"): req/s = prompts / total time, output tok/s = generated tokens
// / total time, total tok/s = (prompt + generated tokens) / total time;
// prefill_s = until the last prompt's first token, decode_s = the rest.
// Denominators are floored at 1e-9 s, as the original.
func (o *Options) result(b batchTiming) results.OfflineResult {
	total := b.end.Sub(b.start).Seconds()
	prefill := b.prefillEnd.Sub(b.start).Seconds()
	decode := total - prefill
	d := max(total, 1e-9)
	return results.OfflineResult{
		TotalInputTokens:     b.totalInputTokens,
		TotalOutputTokens:    b.totalOutTokens,
		PrefillS:             &prefill,
		DecodeS:              &decode,
		TotalS:               total,
		RequestThroughputRPS: float64(o.NumPrompts) / d,
		OutputThroughputTPS:  float64(b.totalOutTokens) / d,
		TotalThroughputTPS:   float64(b.totalInputTokens+b.totalOutTokens) / d,
	}
}

// checkLengths enforces the run's contract: with ignore_eos every prompt
// yields exactly its output length, so the totals are the sums of lengths.
func (o *Options) checkLengths(numTokens, want []int) error {
	if !o.IgnoreEOS {
		return nil
	}
	for i, n := range numTokens {
		if n != want[i] {
			return fmt.Errorf("prompt %d generated %d tokens, want exactly %d (ignore_eos)", i, n, want[i])
		}
	}
	return nil
}

// runInProcess measures roseinfer through the engine API in this process.
func (o *Options) runInProcess(ctx context.Context, batch *Batch) (results.OfflineResult, error) {
	prompts, warmup := batch.Prompts, batch.Warmup
	running, err := o.startEngine(batch)
	if err != nil {
		return results.OfflineResult{}, err
	}
	e, cfg := running.Engine, running.Model
	defer e.Close()
	extra := map[string]any{"prefix_cache": o.PrefixCache, "max_num_seqs": o.MaxBatchSize,
		"model_layers": cfg.NumLayers, "model_channels": cfg.Channels, "kv_blocks": running.KV.NumBlocks,
		"overlap_schedule": running.Options.OverlapSchedule, "load_s": running.LoadTime.Seconds(),
		"max_num_batched_tokens": running.Options.MaxNumBatchedTokens,
		"prefill_split":          "prefill_s = until the last prompt's first token; decode_s = the rest"}
	// A failed batch keeps what is known: the device used (auto resolved) and extra.
	partial := results.OfflineResult{Device: running.Device, Extra: extra}
	params := o.sampleParams()
	if len(warmup) > 0 {
		if _, err := generate(ctx, e, warmup, repeat(len(warmup), batch.WarmupOut), params, uint64(o.Seed)+1<<32, o.IgnoreEOS); err != nil {
			return partial, fmt.Errorf("warmup: %w", err)
		}
	}
	r, err := generate(ctx, e, prompts, batch.OutputLens, params, uint64(o.Seed), o.IgnoreEOS)
	if err != nil {
		return partial, err
	}
	if err := o.checkLengths(r.numTokens, batch.OutputLens); err != nil {
		return partial, err
	}
	prefillEnd, err := r.prefillEnd()
	if err != nil {
		return partial, err
	}
	b := batchTiming{start: r.start, prefillEnd: prefillEnd, end: r.end()}
	for i, p := range prompts {
		b.totalInputTokens += len(p)
		b.totalOutTokens += r.numTokens[i]
	}
	res := o.result(b)
	res.Device, res.Extra = partial.Device, extra
	return res, nil
}

// runServer measures roseinfer through its HTTP server: all prompts sent at
// once as streaming token-id completions.
func (o *Options) runServer(ctx context.Context, runDir string, batch *Batch) (results.OfflineResult, error) {
	prompts, warmup := batch.Prompts, batch.Warmup
	spec, err := o.ServerSpec(ctx, LabelServer)
	if err != nil {
		return results.OfflineResult{}, err
	}
	srv, err := backend.Launch(ctx, spec, backend.LaunchOptions{Host: o.Host, PortBase: o.PortBase, RunDir: runDir,
		ReadyTimeout: o.TimeoutReady})
	if err != nil {
		return results.OfflineResult{}, err
	}
	defer srv.Stop()
	extra := map[string]any{"cmd": srv.Argv, "base_url": srv.BaseURL, "log_path": srv.LogPath,
		"prefill_split": "prefill_s = until the last prompt's first chunk arrived; decode_s = the rest"}
	if v := spec.Version(ctx); v != "" {
		extra["version"] = v
	}
	c := client.New(client.Options{BaseURL: srv.BaseURL, MaxConcurrency: len(prompts), APIKey: spec.APIKey})
	defer c.Close()
	if len(warmup) > 0 {
		if _, err := o.sendBatch(ctx, c, srv.ModelID, warmup, repeat(len(warmup), batch.WarmupOut), false); err != nil {
			return results.OfflineResult{Extra: extra}, fmt.Errorf("warmup: %w", err)
		}
	}
	b, err := o.sendBatch(ctx, c, srv.ModelID, prompts, batch.OutputLens, true)
	if died, why := srv.Died(); died {
		return results.OfflineResult{Extra: extra}, fmt.Errorf("%s", why)
	}
	if err != nil {
		return results.OfflineResult{Extra: extra}, err
	}
	res := o.result(b)
	res.Extra = extra
	return res, nil
}

// ServerSpec is `roseinfer serve` with the engine settings of the
// in-process run (batch size, sim step, prefix cache) and --server-args,
// labelled label. bench offline's profile stage launches the same server.
func (o *Options) ServerSpec(ctx context.Context, label string) (backend.Spec, error) {
	bin := o.RoseinferBin
	if bin == "" {
		var err error
		if bin, err = backend.FindRoseinfer(ctx); err != nil {
			return backend.Spec{}, err
		}
	}
	flags := []string{"--max-num-seqs", strconv.Itoa(o.MaxBatchSize)}
	if o.Device == "sim" && o.SimStep > 0 {
		flags = append(flags, "--sim-step-us", strconv.FormatInt(o.SimStep.Microseconds(), 10))
	}
	if !o.PrefixCache {
		flags = append(flags, "--no-prefix-cache")
	}
	return backend.Roseinfer(backend.RoseinferOptions{Binary: bin, Label: label, Device: o.Device, Model: o.Model,
		Flags: append(flags, o.ServerArgs...), APIKey: o.APIKey}), nil
}

// RequestBody is one prompt's streaming completion with the run's sampling
// settings.
func (o *Options) RequestBody(model string, prompt []int32, maxTokens int, q client.Quirks) ([]byte, error) {
	return client.BuildBody(client.Params{Model: model, PromptTokens: prompt, MaxTokens: maxTokens,
		Temperature: o.Temperature, TopP: o.TopP, TopK: o.TopK, IgnoreEOS: o.IgnoreEOS}, q)
}

// sendBatch sends every prompt at once, prompt i asking for maxTokens[i],
// and waits for all streams; check holds them to checkLengths.
func (o *Options) sendBatch(ctx context.Context, c *client.Client, model string, prompts [][]int32, maxTokens []int, check bool) (batchTiming, error) {
	bodies := make([][]byte, len(prompts))
	for i, p := range prompts {
		var err error
		bodies[i], err = o.RequestBody(model, p, maxTokens[i], client.Roseinfer)
		if err != nil {
			return batchTiming{}, err
		}
	}
	res := make([]*client.Result, len(prompts))
	var wg sync.WaitGroup
	b := batchTiming{start: time.Now()}
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = c.Do(ctx, client.Completions, bodies[i])
		}()
	}
	wg.Wait()
	b.prefillEnd, b.end = b.start, b.start
	numTokens := make([]int, len(res))
	for i, r := range res {
		if r.Err != nil {
			return b, fmt.Errorf("prompt %d: %s: %w", i, r.ErrKind, r.Err)
		}
		if len(r.Chunks) == 0 {
			return b, fmt.Errorf("prompt %d: no tokens", i)
		}
		if r.UsagePromptTokens >= 0 && r.UsagePromptTokens != len(prompts[i]) {
			return b, fmt.Errorf("prompt %d: server counted %d prompt tokens, sent %d", i, r.UsagePromptTokens, len(prompts[i]))
		}
		if first := r.Chunks[0].At; first.After(b.prefillEnd) {
			b.prefillEnd = first
		}
		if last := r.Chunks[len(r.Chunks)-1].At; last.After(b.end) {
			b.end = last
		}
		numTokens[i] = r.NumTokens()
		b.totalInputTokens += len(prompts[i])
		b.totalOutTokens += numTokens[i]
	}
	if check {
		if err := o.checkLengths(numTokens, maxTokens); err != nil {
			return b, err
		}
	}
	return b, nil
}
