// Package cpu is the reference device: pure Go fp32, readable first. It
// implements ops, not model families: its forward walks the family's
// Program (engine/model/arch) and runs each op as one named call
// (encoderForward, layernormForward, matmulForward, attentionForward,
// geluForward, residualForward), each a free function with outputs first and
// sizes last, one file per op, so for GPT-2 the forward is llm.c's flat list;
// the CUDA device keeps the same outline. Only matmulForward (the LM head
// dominates at small C), attention and the sampler are spread over
// goroutines.
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
	"github.com/roseinfer/roseinfer/engine/model/arch"
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
	cfg  model.Config
	w    *model.Weights
	prog program // the family's Program, its tensors resolved in w

	kv       *kvCache
	pool     *pool
	acts     activations
	st       stepLayout
	scores   [][]float32       // per worker: (maxT) attention scores
	samplers []*sample.Sampler // per worker
	closed   bool
}

var _ device.Device = (*Device)(nil)

// New builds a CPU device that runs w's family Program over w (which it
// reads in place but never modifies; keep it alive), with a KV cache of
// kv.NumBlocks blocks of kv.BlockSizeTokens tokens.
func New(w *model.Weights, kv device.KVConfig, opts Options) (*Device, error) {
	if w == nil {
		return nil, errors.New("cpu: nil weights")
	}
	f, err := arch.Lookup(w.Config.Family)
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	return newDevice(w, f.Program(w.Config), kv, opts)
}

// newDevice is New with the Program given (tests run rewritten Programs).
func newDevice(w *model.Weights, prog arch.Program, kv device.KVConfig, opts Options) (*Device, error) {
	cfg := w.Config
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	if cfg != cfg.Complete() || len(w.Data) != cfg.NumParameters() {
		return nil, fmt.Errorf("cpu: weights hold %d values for %+v, not what model.NewWeights makes", len(w.Data), cfg)
	}
	rp, err := resolveProgram(prog, w)
	if err != nil {
		return nil, err
	}
	cache, err := newKVCache(cfg.NumLayers, cfg.KVChannels(), kv.NumBlocks, kv.BlockSizeTokens)
	if err != nil {
		return nil, err
	}
	threads := opts.NumThreads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	d := &Device{
		cfg:  cfg,
		w:    w,
		prog: rp,
		kv:   cache,
		pool: newPool(threads),
	}
	a := &d.acts
	a.tokWidth[arch.BufResidual], a.headWidth[arch.BufResidual] = cfg.Channels, cfg.Channels
	bufferWidths(rp.embed, &a.tokWidth, &a.scratchWidth)
	bufferWidths(rp.layer, &a.tokWidth, &a.scratchWidth)
	bufferWidths(rp.head, &a.headWidth, &a.scratchWidth)
	for range threads {
		d.scores = append(d.scores, make([]float32, cfg.MaxSeqLen))
		d.samplers = append(d.samplers, sample.NewSampler(cfg.VocabSize))
	}
	maxTokens := opts.MaxBatchTokens
	if maxTokens <= 0 {
		maxTokens = 256
	}
	d.acts.ensure(maxTokens, 1)
	return d, nil
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
			logits := d.acts.logits()[j*V : (j+1)*V]
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
	logits = append(logits[:0], d.acts.logits()[:n]...)
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
	d.acts.ensure(len(d.st.tokens), len(d.st.sampleSeqs))
	d.forward()
	return nil
}
