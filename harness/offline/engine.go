package offline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/roseinfer/roseinfer/engine"
	"github.com/roseinfer/roseinfer/engine/launch"
	"github.com/roseinfer/roseinfer/engine/sample"
)

// startEngine builds roseinfer's engine in this process through
// engine/launch, with `roseinfer serve`'s defaults (chunked prefill, CUDA
// graphs, overlap scheduling) on any of its devices, except the KV pool:
// it holds every concurrently running sequence, so the batch never
// preempts; and on cuda, the step token budget (cudaOfflineBatchedTokens).
// Model loading happens here, outside the timed region.
func (o *Options) startEngine(b *Batch) (*launch.Running, error) {
	lo := launch.Defaults()
	lo.Device, lo.ModelDir, lo.SimStep = o.Device, o.Model, o.SimStep
	lo.MaxNumSeqs, lo.PrefixCache = o.MaxBatchSize, o.PrefixCache
	lo.KVCacheTokens = kvTokensWithoutPreemption(b.totalTokens(), o.MaxBatchSize, lo.BlockSizeTokens)
	r, err := launch.Resolve(lo, nil)
	if err != nil {
		return nil, err
	}
	if r.Device == "cuda" {
		r.Options.MaxNumBatchedTokens = cudaOfflineBatchedTokens
	}
	return r.Start(nil)
}

// cudaOfflineBatchedTokens is the in-process run's step token budget on
// cuda: vLLM's offline (LLM class) default on H100-class GPUs, 16384 (its
// API server takes 8192; roseinfer serve 2048, sized for online latency).
// 128 prompts of 256 tokens then prefill in two steps instead of sixteen
// 2048-token steps, each also carrying the decodes already running: on the
// H100 through the server, 69,880 -> 79,751 output tok/s (docs/cuda.md).
// The cpu and sim devices keep serve's budget.
const cudaOfflineBatchedTokens = 16384

// kvTokensWithoutPreemption is a KV pool in which any maxConcurrent of the
// sequences (seqTokens each: prompt plus output) fit at once — the longest
// maxConcurrent of them — with one block each to spare for rounding. With
// equal lengths that is maxConcurrent × one sequence's blocks.
func kvTokensWithoutPreemption(seqTokens []int, maxConcurrent, blockSize int) int {
	sorted := slices.Clone(seqTokens)
	slices.SortFunc(sorted, func(a, b int) int { return b - a })
	numBlocks := 0
	for _, n := range sorted[:min(len(sorted), max(1, maxConcurrent))] {
		numBlocks += (n+blockSize-1)/blockSize + 1
	}
	return max(1, numBlocks) * blockSize
}

// engineRun is what one batch of prompts produced in the engine.
type engineRun struct {
	start       time.Time
	firstTokens []time.Time // per prompt
	lastTokens  []time.Time
	numTokens   []int
	finish      []engine.FinishReason
}

// generate submits every prompt at once and drains all streams. The timed
// region is from the first Submit to the last token of the last prompt.
func generate(ctx context.Context, e *engine.Engine, prompts [][]int32, maxTokens []int, params sample.Params, seed uint64, ignoreEOS bool) (*engineRun, error) {
	n := len(prompts)
	r := &engineRun{firstTokens: make([]time.Time, n), lastTokens: make([]time.Time, n),
		numTokens: make([]int, n), finish: make([]engine.FinishReason, n)}
	streams := make([]*engine.Stream, n)
	r.start = time.Now()
	for i, p := range prompts {
		ps := params
		ps.Seed = seed + uint64(i)
		st, err := e.Submit(&engine.Request{PromptTokens: p, Params: ps, HasSeed: true, MaxTokens: maxTokens[i], IgnoreEOS: ignoreEOS})
		if err != nil {
			for _, s := range streams[:i] {
				s.Abort()
			}
			return nil, fmt.Errorf("submit prompt %d: %w", i, err)
		}
		streams[i] = st
	}
	var wg sync.WaitGroup
	for i, st := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					st.Abort()
					for range st.Outputs() {
					}
					r.finish[i] = engine.FinishAbort
					return
				case out, ok := <-st.Outputs():
					if !ok {
						return
					}
					if out.Token >= 0 {
						if r.numTokens[i] == 0 {
							r.firstTokens[i] = out.At
						}
						r.numTokens[i]++
						r.lastTokens[i] = out.At
					}
					if out.Finished != engine.NotFinished {
						r.finish[i] = out.Finished
					}
				}
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	for i, f := range r.finish {
		if f == engine.FinishError || f == engine.FinishAbort {
			return r, fmt.Errorf("prompt %d ended with %s after %d tokens", i, f, r.numTokens[i])
		}
	}
	return r, nil
}

// end is the last token's instant over all prompts.
func (r *engineRun) end() time.Time {
	end := r.start
	for _, t := range r.lastTokens {
		if t.After(end) {
			end = t
		}
	}
	return end
}

// prefillEnd is when the last prompt received its first token: the end of
// the prefill phase when all prompts arrive at once.
func (r *engineRun) prefillEnd() (time.Time, error) {
	end := r.start
	for i, t := range r.firstTokens {
		if t.IsZero() {
			return time.Time{}, errors.New("a prompt produced no token")
		}
		if r.numTokens[i] > 0 && t.After(end) {
			end = t
		}
	}
	return end, nil
}
