package cpu

import (
	"fmt"

	"github.com/roseinfer/roseinfer/engine/device"
	"github.com/roseinfer/roseinfer/engine/model"
	"github.com/roseinfer/roseinfer/engine/model/arch"
)

// activations are the forward's buffers, allocated once and grown only when
// a step needs more: tok has one row per token of the step (BT), for the
// Embed and Layer ops; head one row per sampled position (M), for the Head
// ops. Each buffer is as wide as the widest op that uses it (widths, from
// the Program at New). Inference needs no per-layer copies (no backward), so
// the layers reuse them.
type activations struct {
	maxBT, maxM         int
	tokWidth, headWidth [arch.NumBufs]int
	tok, head           [arch.NumBufs][]float32
	tokScratch          []float32 // (BT, widest accumulating linear): its product before the add
	headScratch         []float32 // (M, same)
	scratchWidth        int
}

func (a *activations) ensure(BT, M int) {
	if BT > a.maxBT {
		a.maxBT = max(BT, a.maxBT*5/4)
		for b, w := range a.tokWidth {
			a.tok[b] = make([]float32, a.maxBT*w)
		}
		a.tokScratch = make([]float32, a.maxBT*a.scratchWidth)
	}
	if M > a.maxM {
		a.maxM = max(M, a.maxM*5/4)
		for b, w := range a.headWidth {
			a.head[b] = make([]float32, a.maxM*w)
		}
		a.headScratch = make([]float32, a.maxM*a.scratchWidth)
	}
}

// logits are the sampled rows' logits (M, V) of the last forward.
func (a *activations) logits() []float32 { return a.head[arch.BufLogits] }

// stepLayout is a batch flattened into per-token arrays, rebuilt each step in
// reused buffers.
type stepLayout struct {
	tokens      []int32   // (BT) token ids
	positions   []int32   // (BT) each token's position in its sequence
	seqIndex    []int32   // (BT) index into Batch.Seqs of each token's sequence
	blockTables [][]int32 // per Seq, aliasing the batch's block tables
	sampleRows  []int32   // (M) row of the last token of each Seq with Sample=true
	sampleSeqs  []int32   // (M) that Seq's index
}

// prepare checks the batch against the model and the cache (a bad batch is
// an error, never an out-of-range access) and fills the layout.
func (st *stepLayout) prepare(b *device.Batch, cfg model.Config, kv *kvCache) error {
	st.tokens, st.positions, st.seqIndex = st.tokens[:0], st.positions[:0], st.seqIndex[:0]
	st.blockTables = st.blockTables[:0]
	st.sampleRows, st.sampleSeqs = st.sampleRows[:0], st.sampleSeqs[:0]
	for i := range b.Seqs {
		s := &b.Seqs[i]
		end := s.StartPos + len(s.Tokens)
		switch {
		case len(s.Tokens) == 0:
			return fmt.Errorf("cpu: seq %d has no tokens", s.SeqID)
		case s.StartPos < 0:
			return fmt.Errorf("cpu: seq %d has StartPos %d < 0", s.SeqID, s.StartPos)
		case end > cfg.MaxSeqLen:
			return fmt.Errorf("cpu: seq %d reaches position %d, beyond the model's %d", s.SeqID, end, cfg.MaxSeqLen)
		case len(s.BlockTable)*kv.blockSize < end:
			return fmt.Errorf("cpu: seq %d: %d blocks of %d tokens cannot hold %d positions", s.SeqID, len(s.BlockTable), kv.blockSize, end)
		}
		for _, blk := range s.BlockTable[:(end+kv.blockSize-1)/kv.blockSize] {
			if blk < 0 || int(blk) >= kv.numBlocks {
				return fmt.Errorf("cpu: seq %d uses block %d outside the cache's %d", s.SeqID, blk, kv.numBlocks)
			}
		}
		for j, tok := range s.Tokens {
			if tok < 0 || int(tok) >= cfg.VocabSize {
				return fmt.Errorf("cpu: seq %d has token %d outside the vocabulary of %d", s.SeqID, tok, cfg.VocabSize)
			}
			st.tokens = append(st.tokens, tok)
			st.positions = append(st.positions, int32(s.StartPos+j))
			st.seqIndex = append(st.seqIndex, int32(i))
		}
		st.blockTables = append(st.blockTables, s.BlockTable)
		if s.Sample {
			st.sampleRows = append(st.sampleRows, int32(len(st.tokens)-1))
			st.sampleSeqs = append(st.sampleSeqs, int32(i))
		}
	}
	return nil
}

// forward runs the model's Program over the laid-out step, leaving the
// sampled rows' logits in d.acts.logits(): the Embed ops, the Layer ops for
// each layer, then the Head ops on the sampled rows only. For GPT-2 that is
// llm.c's list: encoder; per layer layernorm, qkv matmul, attention (with
// its KV append), projection, residual, layernorm, MLP up, GELU, MLP down,
// residual; then the final layernorm and the LM head. For Qwen3 the norms
// are RMSNorms, attention first norms and rotates q and k, and the MLP is
// gate|up, SwiGLU, down.
func (d *Device) forward() {
	a, st := &d.acts, &d.st
	BT, M := len(st.tokens), len(st.sampleRows)
	for i := range d.prog.embed {
		d.runOp(&d.prog.embed[i], 0, BT, &a.tok, a.tokScratch)
	}
	for l := 0; l < d.cfg.NumLayers; l++ {
		for i := range d.prog.layer {
			d.runOp(&d.prog.layer[i], l, BT, &a.tok, a.tokScratch)
		}
	}
	// Only the positions that sample need the head, whose LM head costs V·C
	// per row: skipping the rest is most of a prefill's savings.
	C := d.cfg.Channels
	residual, last := a.tok[arch.BufResidual], a.head[arch.BufResidual]
	for j, row := range st.sampleRows {
		copy(last[j*C:(j+1)*C], residual[int(row)*C:(int(row)+1)*C])
	}
	for i := range d.prog.head {
		d.runOp(&d.prog.head[i], 0, M, &a.head, a.headScratch)
	}
}

// runOp runs one op over the first rows rows of bufs, with layer l's
// weights and KV cache: one named call per op kind.
func (d *Device) runOp(o *op, l, rows int, bufs *[arch.NumBufs][]float32, scratch []float32) {
	out, in := bufs[o.Out], bufs[o.In]
	w, b := o.layerWeights(l)
	p := d.pool
	switch o.Kind {
	case arch.OpEmbed:
		encoderForward(out, d.st.tokens, d.st.positions, w, o.pos, rows, o.OutDim)
	case arch.OpLayerNorm:
		layernormForward(out, in, w, b, o.Eps, rows, o.InDim, p)
	case arch.OpLinear:
		dst := out
		if o.Accumulate {
			dst = scratch
		}
		matmulForward(dst, in, w, b, rows, o.InDim, o.OutDim, p)
		if o.Act == arch.ActGELU {
			geluForward(dst, dst, rows*o.OutDim, p)
		}
		if o.Accumulate {
			residualForward(out, out, dst, rows*o.OutDim)
		}
	case arch.OpRMSNorm:
		rmsnormForward(out, in, w, o.Eps, rows, o.InDim, p)
	case arch.OpSwiGLU:
		swigluForward(out, in, rows, o.OutDim, p)
	case arch.OpAttention:
		NH, NKV, HS := o.NumHeads, o.NumKVHeads, o.HeadDim
		if o.qNorm != nil {
			qw, kw := o.layerQKNorm(l)
			qkNormForward(in, qw, kw, o.Eps, rows, NH, NKV, HS, p)
		}
		if o.RopeTheta > 0 {
			ropeForward(in, d.st.positions, o.RopeTheta, rows, NH, NKV, HS, p)
		}
		kvAppendForward(d.kv, l, in, &d.st, rows, NH, NKV, HS)
		attentionForward(out, in, d.kv, l, &d.st, d.scores, rows, NH, NKV, HS, p)
	case arch.OpGELU:
		geluForward(out, in, rows*o.InDim, p)
	case arch.OpResidual:
		residualForward(out, out, in, rows*o.InDim)
	}
}
