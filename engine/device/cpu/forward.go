package cpu

import (
	"fmt"

	"github.com/roseinfer/roseinfer/engine/device"
	"github.com/roseinfer/roseinfer/engine/model"
)

// activations are the forward's buffers for up to BT tokens and M sampled
// rows, allocated once and grown only when a step needs more. Inference needs
// no per-layer copies (no backward), so the layers reuse them.
type activations struct {
	maxBT, maxM int
	residual    []float32 // (BT, C) the residual stream
	ln          []float32 // (BT, C) layernorm output (ln_1, then ln_2)
	qkv         []float32 // (BT, 3C)
	atty        []float32 // (BT, C) attention output, heads side by side
	attproj     []float32 // (BT, C)
	fch         []float32 // (BT, 4C) MLP hidden, GELU applied in place
	fcproj      []float32 // (BT, C)
	lastHidden  []float32 // (M, C) residual rows of the sampled positions
	lnf         []float32 // (M, C)
	logits      []float32 // (M, V)
}

func (a *activations) ensure(cfg model.Config, BT, M int) {
	C, V := cfg.Channels, cfg.VocabSize
	if BT > a.maxBT {
		a.maxBT = max(BT, a.maxBT*5/4)
		n := a.maxBT
		a.residual = make([]float32, n*C)
		a.ln = make([]float32, n*C)
		a.qkv = make([]float32, n*3*C)
		a.atty = make([]float32, n*C)
		a.attproj = make([]float32, n*C)
		a.fch = make([]float32, n*4*C)
		a.fcproj = make([]float32, n*C)
	}
	if M > a.maxM {
		a.maxM = max(M, a.maxM*5/4)
		a.lastHidden = make([]float32, a.maxM*C)
		a.lnf = make([]float32, a.maxM*C)
		a.logits = make([]float32, a.maxM*V)
	}
}

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

// forward is GPT-2 over the laid-out step, leaving the sampled rows' logits
// in d.acts.logits. Per layer: layernorm, qkv matmul, KV append, attention,
// projection, residual, layernorm, MLP up, GELU, MLP down, residual.
func (d *Device) forward() {
	cfg, w, a, st, p := d.cfg, d.w, &d.acts, &d.st, d.pool
	L, C, NH, V := cfg.NumLayers, cfg.Channels, cfg.NumHeads, cfg.VocabSize
	BT, M := len(st.tokens), len(st.sampleRows)
	eps := cfg.LayerNormEpsilon

	encoderForward(a.residual, st.tokens, st.positions, w.WTE, w.WPE, BT, C)
	for l := 0; l < L; l++ {
		// Layer l's weights: views into the stacked (L, ...) tensors.
		ln1w, ln1b := w.LN1W[l*C:(l+1)*C], w.LN1B[l*C:(l+1)*C]
		qkvw, qkvb := d.qkvw[l*3*C*C:(l+1)*3*C*C], w.QKVB[l*3*C:(l+1)*3*C]
		attprojw, attprojb := d.attprojw[l*C*C:(l+1)*C*C], w.AttProjB[l*C:(l+1)*C]
		ln2w, ln2b := w.LN2W[l*C:(l+1)*C], w.LN2B[l*C:(l+1)*C]
		fcw, fcb := d.fcw[l*4*C*C:(l+1)*4*C*C], w.FCB[l*4*C:(l+1)*4*C]
		fcprojw, fcprojb := d.fcprojw[l*4*C*C:(l+1)*4*C*C], w.FCProjB[l*C:(l+1)*C]

		layernormForward(a.ln, a.residual, ln1w, ln1b, eps, BT, C, p)
		matmulForward(a.qkv, a.ln, qkvw, qkvb, BT, C, 3*C, p)
		kvAppendForward(d.kv, l, a.qkv, st, BT, C)
		attentionForward(a.atty, a.qkv, d.kv, l, st, d.scores, BT, C, NH, p)
		matmulForward(a.attproj, a.atty, attprojw, attprojb, BT, C, C, p)
		residualForward(a.residual, a.residual, a.attproj, BT*C)
		layernormForward(a.ln, a.residual, ln2w, ln2b, eps, BT, C, p)
		matmulForward(a.fch, a.ln, fcw, fcb, BT, C, 4*C, p)
		geluForward(a.fch, a.fch, BT*4*C, p)
		matmulForward(a.fcproj, a.fch, fcprojw, fcprojb, BT, 4*C, C, p)
		residualForward(a.residual, a.residual, a.fcproj, BT*C)
	}
	// Only the positions that sample need the final layernorm and the LM
	// head, which costs V·C per row: skipping the rest is most of a
	// prefill's savings.
	for j, row := range st.sampleRows {
		copy(a.lastHidden[j*C:(j+1)*C], a.residual[int(row)*C:(int(row)+1)*C])
	}
	layernormForward(a.lnf, a.lastHidden, w.LNFW, w.LNFB, eps, M, C, p)
	matmulForward(a.logits, a.lnf, w.WTE, nil, M, C, V, p)
}
