// Package cpu is the reference device: GPT-2 in pure Go fp32, readable
// first. The forward is a flat list of named ops in llm.c's order
// (encoderForward, layernormForward, matmulForward, attentionForward,
// geluForward, residualForward), each a free function with outputs first and
// sizes last, one file per op; the CUDA device keeps the same outline. Only
// matmulForward (the LM head dominates at small C), attention and the sampler
// are spread over goroutines.
//
// It owns the paged KV cache storage; the engine owns the block ids. It
// imports the model and the sampler, never the scheduler or the engine.
package cpu

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/roseinfer/roseinfer/engine/device"
	"github.com/roseinfer/roseinfer/engine/model"
	"github.com/roseinfer/roseinfer/engine/sample"
)

// Options tune the device; the zero value is a good default.
type Options struct {
	// NumThreads is how many goroutines run the parallel ops, the caller's
	// included (0 = GOMAXPROCS).
	NumThreads int
	// MaxBatchTokens sizes the activations up front; a larger step grows
	// them (0 = 256).
	MaxBatchTokens int
}

// Device implements device.Device on the CPU.
type Device struct {
	cfg model.Config
	w   *model.Weights
	// HF Conv1D weights re-laid out as (OC, C) for matmulForward; the other
	// tensors are read from w directly.
	qkvw     []float32 // (L, 3C, C)
	attprojw []float32 // (L, C, C)
	fcw      []float32 // (L, 4C, C)
	fcprojw  []float32 // (L, C, 4C)

	kv       *kvCache
	pool     *pool
	acts     activations
	st       stepLayout
	scores   [][]float32       // per worker: (maxT) attention scores
	samplers []*sample.Sampler // per worker
	closed   bool
}

var _ device.Device = (*Device)(nil)

// New builds a CPU device over w (which it reads but never modifies; keep it
// alive) with a KV cache of kv.NumBlocks blocks of kv.BlockSizeTokens tokens.
// It copies the four Conv1D matrices into nn.Linear layout, so it holds about
// the layers' parameter size again in memory.
func New(w *model.Weights, kv device.KVConfig, opts Options) (*Device, error) {
	if w == nil {
		return nil, errors.New("cpu: nil weights")
	}
	cfg := w.Config
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	if len(w.Data) != cfg.NumParameters() {
		return nil, fmt.Errorf("cpu: weights hold %d values, config needs %d", len(w.Data), cfg.NumParameters())
	}
	cache, err := newKVCache(cfg.NumLayers, cfg.Channels, kv.NumBlocks, kv.BlockSizeTokens)
	if err != nil {
		return nil, err
	}
	threads := opts.NumThreads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	L, C := cfg.NumLayers, cfg.Channels
	d := &Device{
		cfg:      cfg,
		w:        w,
		qkvw:     transposeLayers(w.QKVW, L, C, 3*C),
		attprojw: transposeLayers(w.AttProjW, L, C, C),
		fcw:      transposeLayers(w.FCW, L, C, 4*C),
		fcprojw:  transposeLayers(w.FCProjW, L, 4*C, C),
		kv:       cache,
		pool:     newPool(threads),
	}
	for range threads {
		d.scores = append(d.scores, make([]float32, cfg.MaxSeqLen))
		d.samplers = append(d.samplers, sample.NewSampler(cfg.VocabSize))
	}
	maxTokens := opts.MaxBatchTokens
	if maxTokens <= 0 {
		maxTokens = 256
	}
	d.acts.ensure(cfg, maxTokens, 1)
	return d, nil
}

// transposeLayers turns L stacked (IC, OC) matrices into (OC, IC) ones.
func transposeLayers(src []float32, L, IC, OC int) []float32 {
	dst := make([]float32, len(src))
	for l := 0; l < L; l++ {
		s, d := src[l*IC*OC:(l+1)*IC*OC], dst[l*IC*OC:(l+1)*IC*OC]
		for i := 0; i < IC; i++ {
			for o := 0; o < OC; o++ {
				d[o*IC+i] = s[i*OC+o]
			}
		}
	}
	return dst
}

// Name is "cpu".
func (d *Device) Name() string { return "cpu" }

// Config is the model the device runs.
func (d *Device) Config() model.Config { return d.cfg }

// Close stops the worker goroutines and drops the cache; safe to call twice.
func (d *Device) Close() error {
	if d.closed {
		return nil
	}
	d.closed = true
	d.pool.close()
	d.kv = nil
	return nil
}

// Forward runs one step: every Seq's tokens go through the model, their keys
// and values land in the cache, and each Seq with Sample=true gets a token
// drawn from its last position's logits.
func (d *Device) Forward(b *device.Batch, out []device.Sampled) ([]device.Sampled, error) {
	out = out[:0]
	if err := d.run(b); err != nil {
		return out, err
	}
	for range b.Seqs {
		out = append(out, device.Sampled{Token: -1})
	}
	V := d.cfg.VocabSize
	st := &d.st
	d.pool.parallel(len(st.sampleSeqs), 1, 1, func(worker, lo, hi int) {
		for j := lo; j < hi; j++ {
			i := st.sampleSeqs[j]
			seq := &b.Seqs[i]
			logits := d.acts.logits[j*V : (j+1)*V]
			tok := d.samplers[worker].Sample(logits, seq.Params, seq.SampleIndex, seq.BannedToken)
			out[i].Token = tok
			if seq.WantLogprob {
				out[i].Logprob = sample.LogProb(logits, tok)
			}
		}
	})
	return out, nil
}

// ForwardLogits runs one step like Forward but returns, instead of samples,
// the logits (M, V) of the M Seqs with Sample=true, in batch order, in
// logits (grown as needed). Tests use it to compare with reference logits.
func (d *Device) ForwardLogits(b *device.Batch, logits []float32) ([]float32, error) {
	if err := d.run(b); err != nil {
		return logits[:0], err
	}
	n := len(d.st.sampleSeqs) * d.cfg.VocabSize
	logits = append(logits[:0], d.acts.logits[:n]...)
	return logits, nil
}

// run validates the batch, lays it out and runs the forward.
func (d *Device) run(b *device.Batch) error {
	if d.closed {
		return errors.New("cpu: device is closed")
	}
	if b == nil {
		return errors.New("cpu: nil batch")
	}
	if err := d.st.prepare(b, d.cfg, d.kv); err != nil {
		return err
	}
	d.acts.ensure(d.cfg, len(d.st.tokens), len(d.st.sampleSeqs))
	d.forward()
	return nil
}
