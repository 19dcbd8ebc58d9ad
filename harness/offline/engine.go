package offline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/roseinfer/roseinfer/engine"
	"github.com/roseinfer/roseinfer/engine/device"
	"github.com/roseinfer/roseinfer/engine/device/cpu"
	"github.com/roseinfer/roseinfer/engine/device/sim"
	"github.com/roseinfer/roseinfer/engine/model"
	"github.com/roseinfer/roseinfer/engine/sample"
)

// EngineOptions say which engine the in-process run builds.
type EngineOptions struct {
	Device        string // cpu or sim
	Model         string // HF checkpoint directory; "" = the built-in tiny preset
	ModelSeed     uint64 // weights seed of the built-in preset
	SimStep       time.Duration
	MaxNumSeqs    int // --max-batch-size
	PrefixCache   bool
	MaxConcurrent int // sequences the KV pool must hold at once
	MaxSeqTokens  int // input + output tokens of one sequence
}

// openEngine builds the device and engine in this process: the small engine
// API (engine.New over a device) the offline run measures. Model loading
// happens here, outside the timed region.
func openEngine(o EngineOptions) (*engine.Engine, model.Config, error) {
	cfg, dev, err := openDevice(o)
	if err != nil {
		return nil, model.Config{}, err
	}
	e, err := engine.New(engine.Config{
		MaxNumSeqs:      o.MaxNumSeqs,
		ChunkedPrefill:  true,
		BlockSizeTokens: engine.DefaultBlockSizeTokens,
		NumBlocks:       numBlocks(o),
		PrefixCache:     o.PrefixCache,
		MaxModelLen:     cfg.MaxSeqLen,
		EOSToken:        cfg.EOSTokenID,
	}, dev)
	if err != nil {
		dev.Close()
		return nil, model.Config{}, err
	}
	return e, cfg, nil
}

// numBlocks sizes the KV pool so every concurrently running sequence fits
// without preemption (plus one block each for rounding).
func numBlocks(o EngineOptions) int {
	bs := engine.DefaultBlockSizeTokens
	perSeq := (o.MaxSeqTokens+bs-1)/bs + 1
	return max(1, o.MaxConcurrent) * perSeq
}

func openDevice(o EngineOptions) (model.Config, device.Device, error) {
	kv := device.KVConfig{NumBlocks: numBlocks(o), BlockSizeTokens: engine.DefaultBlockSizeTokens}
	switch o.Device {
	case "sim":
		cfg, err := model.Preset("tiny")
		if err != nil {
			return model.Config{}, nil, err
		}
		dev, err := sim.New(sim.Options{StepDuration: o.SimStep, VocabSize: cfg.VocabSize, EOS: cfg.EOSTokenID})
		return cfg, dev, err
	case "cpu", "":
		var w *model.Weights
		var err error
		if o.Model == "" {
			cfg, perr := model.Preset("tiny")
			if perr != nil {
				return model.Config{}, nil, perr
			}
			w, err = model.InitRandom(cfg, o.ModelSeed)
		} else {
			w, err = model.LoadCheckpoint(o.Model)
		}
		if err != nil {
			return model.Config{}, nil, fmt.Errorf("load model: %w", err)
		}
		dev, err := cpu.New(w, kv, cpu.Options{})
		if err != nil {
			return model.Config{}, nil, err
		}
		return w.Config, dev, nil
	}
	return model.Config{}, nil, fmt.Errorf("in-process device %q is not supported (cpu or sim)", o.Device)
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
func generate(ctx context.Context, e *engine.Engine, prompts [][]int32, maxTokens int, params sample.Params, seed uint64, ignoreEOS bool) (*engineRun, error) {
	n := len(prompts)
	r := &engineRun{firstTokens: make([]time.Time, n), lastTokens: make([]time.Time, n),
		numTokens: make([]int, n), finish: make([]engine.FinishReason, n)}
	streams := make([]*engine.Stream, n)
	r.start = time.Now()
	for i, p := range prompts {
		ps := params
		ps.Seed = seed + uint64(i)
		st, err := e.Submit(&engine.Request{PromptTokens: p, Params: ps, HasSeed: true, MaxTokens: maxTokens, IgnoreEOS: ignoreEOS})
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
