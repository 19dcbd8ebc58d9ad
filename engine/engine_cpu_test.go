package engine

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/roseinfer/roseinfer/engine/device"
	"github.com/roseinfer/roseinfer/engine/device/cpu"
	"github.com/roseinfer/roseinfer/engine/model"
	"github.com/roseinfer/roseinfer/engine/sample"
)

// tinyWeights is the tiny preset with seed 1, built once for all CPU tests.
var tinyWeights = sync.OnceValues(func() (*model.Weights, error) {
	cfg, err := model.Preset("tiny")
	if err != nil {
		return nil, err
	}
	return model.InitRandom(cfg, 1)
})

// newCPUEngine runs the tiny model on the CPU device under cfg.
func newCPUEngine(t *testing.T, cfg Config) *Engine {
	t.Helper()
	dev := tinyCPUDevice(t, &cfg)
	return newEngine(t, cfg, dev)
}

// tinyCPUDevice builds the CPU device over the tiny model with cfg's KV
// cache, and sets cfg's model length and EOS token from the model.
func tinyCPUDevice(t *testing.T, cfg *Config) *cpu.Device {
	t.Helper()
	w, err := tinyWeights()
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxModelLen, cfg.EOSToken = w.Config.MaxSeqLen, w.Config.EOSTokenID
	dev, err := cpu.New(w, device.KVConfig{NumBlocks: cfg.NumBlocks, BlockSizeTokens: cfg.BlockSizeTokens}, cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return dev
}

// batchRequests are 32 requests of different prompt and output lengths. The
// prompts of the first 16 share a 40-token prefix, so a warm prefix cache
// serves part of them. A few sample with a seed instead of greedily: seeded
// sampling must be batch-invariant too.
func batchRequests() []Request {
	shared := prompt(3000, 40)
	reqs := make([]Request, 32)
	for i := range reqs {
		var p []int32
		if i < 16 {
			p = append(p, shared[:8+2*i]...)
		}
		p = append(p, prompt(100*i+7, 1+(i*7)%29)...)
		reqs[i] = Request{PromptTokens: p, MaxTokens: 4 + (i*5)%13, IgnoreEOS: true}
		if i%8 == 3 {
			reqs[i].Params = sample.Params{Temperature: 0.9, TopK: 40, TopP: 0.95, Seed: uint64(i)}
			reqs[i].HasSeed = true
		}
	}
	return reqs
}

// submitAll submits reqs at once and returns their streams.
func submitAll(t *testing.T, e *Engine, reqs []Request) []*Stream {
	t.Helper()
	streams := make([]*Stream, len(reqs))
	for i := range reqs {
		s, err := e.Submit(&reqs[i])
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		streams[i] = s
	}
	return streams
}

// generate submits reqs at once and returns each one's tokens and timing.
func generate(t *testing.T, e *Engine, reqs []Request) ([][]int32, []Timing) {
	t.Helper()
	streams := submitAll(t, e, reqs)
	tokens := make([][]int32, len(reqs))
	timings := make([]Timing, len(reqs))
	for i, s := range streams {
		for _, o := range collect(t, s) {
			if o.Finished == FinishError || o.Finished == FinishAbort {
				t.Fatalf("request %d ended with %v", i, o.Finished)
			}
			tokens[i] = append(tokens[i], o.Token)
		}
		timings[i] = s.Timing()
	}
	return tokens, timings
}

// TestBatchInvariance: a request's output on the CPU device is the same
// alone and inside a batch of 31 others of different lengths, with and
// without chunked prefill, with prefix-cache hits, and after preemptions.
func TestBatchInvariance(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the tiny model on the CPU")
	}
	reqs := batchRequests()
	alone := make([][]int32, len(reqs))
	aloneEngine := newCPUEngine(t, Config{
		MaxNumSeqs: 1, MaxNumBatchedTokens: 1024, BlockSizeTokens: 16, NumBlocks: 64,
	})
	for i := range reqs {
		toks, _ := generate(t, aloneEngine, reqs[i:i+1])
		alone[i] = toks[0]
	}
	aloneEngine.Close()

	for _, tc := range []struct {
		name           string
		cfg            Config
		wantCacheHits  bool
		wantPreemption bool
	}{
		{"whole prompts", Config{MaxNumSeqs: 32, MaxNumBatchedTokens: 1024, BlockSizeTokens: 16, NumBlocks: 256}, false, false},
		{"chunked prefill", Config{MaxNumSeqs: 32, MaxNumBatchedTokens: 48, PrefillChunkSize: 5, ChunkedPrefill: true, BlockSizeTokens: 16, NumBlocks: 256}, false, false},
		{"whole prompts, prefix cache", Config{MaxNumSeqs: 32, MaxNumBatchedTokens: 1024, BlockSizeTokens: 4, NumBlocks: 256, PrefixCache: true}, true, false},
		{"chunked prefill, prefix cache", Config{MaxNumSeqs: 32, MaxNumBatchedTokens: 64, PrefillChunkSize: 7, ChunkedPrefill: true, BlockSizeTokens: 4, NumBlocks: 256, PrefixCache: true}, true, false},
		{"chunked prefill, preemptions", Config{MaxNumSeqs: 32, MaxNumBatchedTokens: 64, PrefillChunkSize: 16, ChunkedPrefill: true, BlockSizeTokens: 4, NumBlocks: 40, PrefixCache: true}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newCPUEngine(t, tc.cfg)
			if tc.wantCacheHits {
				// Warm the cache with the shared prefix, then run the batch.
				warm := Request{PromptTokens: prompt(3000, 40), MaxTokens: 1}
				generate(t, e, []Request{warm})
			}
			got, timings := generate(t, e, reqs)
			for i := range reqs {
				if !slices.Equal(got[i], alone[i]) {
					t.Errorf("request %d (prompt %d tokens): in a batch %v, alone %v", i, len(reqs[i].PromptTokens), got[i], alone[i])
				}
			}
			st := e.Stats()
			numCached := 0
			for _, tm := range timings {
				numCached += tm.NumCachedTokens
			}
			if tc.wantCacheHits != (numCached > 0) {
				t.Errorf("%d prompt tokens came from the prefix cache", numCached)
			}
			if tc.wantPreemption != (st.NumPreemptions > 0) {
				t.Errorf("%d preemptions", st.NumPreemptions)
			}
			t.Log(describeRun(st, numCached))
		})
	}
}

func describeRun(st Stats, numCached int) string {
	return fmt.Sprintf("%d steps, %d preemptions, %d cached prompt tokens", st.NumSteps, st.NumPreemptions, numCached)
}
