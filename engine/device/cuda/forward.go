package cuda

import (
	"fmt"
	"math"
)

// activations are the step's device buffers, sized once for the largest step
// (Options.MaxStepTokens rows, Options.MaxSeqs sampled rows).
type activations struct {
	residual devPtr // (N, C) fp32: the residual stream
	ln       devPtr // (N, C) fp16: LayerNorm output, GEMM input
	qkv      devPtr // (N, 3C) fp16
	attn     devPtr // (N, C) fp16: attention output
	fc       devPtr // (N, 4C) fp16: GELU(fc) output
	delta    devPtr // (N, C) fp16: projection output when the GEMM cannot accumulate in fp32
	attnPart devPtr // (M, NH, maxDecodeSplits, HD+2) fp32: split decode partials
	lnf      devPtr // (M, C) fp16: final LayerNorm at sampled rows
	logits   devPtr // (M, Vp) fp32
	tileKeys devPtr // (M, Vp / 8) uint32: each 8-column tile's largest logit key (lmhead.cu)
	outTok   devPtr // (M) int32: sampled ids, the previous step's samples for overlap
	lnStats  devPtr // (L, N, 2) fp32: each layer's rows' sum and sum of squares after attproj (the LayerNorm fold); then L uint32 barrier counters (gemm_wg_pair)
}

// in returns the device address of a layout region of the step's inputs.
func (p *stepPlan) in(off int) devPtr { return p.inputs + devPtr(4*off) }

// forward enqueues one step's kernels on the stream: llm.c's gpt2_forward as
// a flat list of named ops, with the paged-attention and sampling steps. It
// reads inputs already copied to p.inputs and leaves sampled ids and
// logprobs in the stage's mapped host memory (ids also in outTok). It is
// also what a CUDA graph captures. Each op picks its kernels for the step's
// row counts (newStep) and tells the instrumentation hook when it is done.
func (d *Device) forward(p *stepPlan) error {
	if d.q3 != nil {
		return d.forwardRotary(p)
	}
	s := d.newStep(p)
	s.end("start", nil)
	s.encoder()
	for l := 0; l < d.cfg.NumLayers; l++ {
		s.ln1QKV(l)      // ln_1, then the qkv projection
		s.kvWrite(l)     // the prompt rows' keys and values into the cache
		s.attnDecode(l)  // attention of the one-token rows
		s.attnPrefill(l) // attention of the prompt chunks
		s.attProjFC(l)   // attproj (+= residual), ln_2, fc and GELU
		s.fcProj(l)      // fcproj (+= residual)
	}
	if s.M > 0 { // only the rows that sample go through ln_f and the LM head
		s.lmHead()
		s.sample()
	}
	return s.err
}

// step is one forward pass being enqueued: its plan and the kernel choices
// its row counts decide. Its methods are the forward's ops; the first error
// sticks and turns every later op into a no-op, so forward reads as the list
// of ops and returns that error.
type step struct {
	d    *Device
	p    *stepPlan
	N, M int // token rows, sampled rows
	// small: the projections run through gemv.cu with the LayerNorm fused.
	small bool
	// fold: the LayerNorm between attproj and fc is folded into both
	// projections' epilogues (gemm_wg.cu); pair runs them as one grid of
	// pairGrid blocks, pairBN columns a block in its second phase.
	fold, pair       bool
	pairBN, pairGrid int
	tileKeys         devPtr // set by an LM head that writes tile maxima for the sampler
	err              error
}

func (d *Device) newStep(p *stepPlan) step {
	s := step{d: d, p: p, N: p.lay.nTok, M: p.lay.nSample}
	s.small = d.useGemv(s.N)
	s.fold = d.lnFold(s.N)
	s.pairBN, s.pairGrid, s.pair = d.pairShape(s.N)
	return s
}

// end records err, the outcome of the op named name, and tells the
// instrumentation hook that the op is done.
func (s *step) end(name string, err error) {
	if s.err == nil {
		s.err = err
	}
	if s.err == nil {
		s.err = s.d.opDone(name)
	}
}

// encoder: residual = wte[token] + wpe[position], for every row. It also
// takes decode tokens sampled by the previous step (act.outTok), and clears
// the LayerNorm fold's row statistics, which attproj's blocks add into (and
// gemm_wg_pair's blocks count through its barrier), so no memset node stands
// before it on every step's critical path.
func (s *step) encoder() {
	if s.err != nil {
		return
	}
	d, g, a, p, lay := s.d, s.d.g, &s.d.act, s.p, &s.p.lay
	nzero := 0
	if s.fold {
		nzero = lnStatsWords(d.cfg.NumLayers, s.N)
	}
	// The step's first kernel follows the inputs' host-to-device copy, not a
	// kernel: it launches without programmatic dependent launch.
	err := g.launchOn(g.stream, false, d.k.encoder, ceilDiv(s.N*d.cfg.Channels, 256), 1, 1, 256, 0,
		argPtr(a.residual), argPtr(p.in(lay.tokens)), argPtr(a.outTok), argPtr(p.in(lay.srcRows)), argPtr(p.in(lay.pos)),
		argPtr(d.w.wte), argPtr(d.w.wpe), argInt(s.N), argInt(d.cfg.Channels), argPtr(a.lnStats), argInt(nzero))
	s.end("encoder", err)
}

// ln1QKV: qkv = LayerNorm(residual; ln_1) @ W_qkv^T + b_qkv (fp16).
func (s *step) ln1QKV(l int) {
	if s.err != nil {
		return
	}
	d, a, w, C := s.d, &s.d.act, &s.d.w.layers[l], s.d.cfg.Channels
	if s.small {
		s.end("gemv_ln_qkv", d.gemvLN(a.qkv, 3*C, a.residual, 0, w.ln1W, w.ln1B, w.qkvW, w.qkvB, s.N, 3*C, gemvOut16Bias, 0))
		return
	}
	// lnProjection tells the hook of its "layernorm" and of "gemm_qkv".
	s.err = d.lnProjection(a.qkv, 3*C, w.ln1W, w.ln1B, w.qkvW, w.qkvB, s.N, 3*C, false, "gemm_qkv")
}

// kvWrite stores the keys and values of a step's prompt rows in layer l's
// cache (the decode kernels store their own row's as they read).
func (s *step) kvWrite(l int) {
	if s.err != nil || s.p.nPrefill == 0 {
		return
	}
	d, p, lay := s.d, s.p, &s.p.lay
	kc, vc := d.kvLayer(l)
	NH := d.cfg.NumHeads
	s.end("kv_write", d.g.launch(d.k.kvWrite, ceilDiv(s.N*d.cfg.Channels/8, 256), 1, 1, 256, 0,
		argPtr(kc), argPtr(vc), argPtr(d.act.qkv), argPtr(p.in(lay.slots)), argInt(s.N), argInt(NH), argInt(d.cfg.Channels/NH),
		argInt(d.kv.BlockSizeTokens)))
}

// attnDecode: attention of the step's one-token rows over their sequences'
// cached keys and values, split over key slices where the rows are few
// (decodeSplits).
func (s *step) attnDecode(l int) {
	if s.err != nil || s.p.nDecode == 0 {
		return
	}
	d, g, a, p, lay := s.d, s.d.g, &s.d.act, s.p, &s.p.lay
	kc, vc := d.kvLayer(l)
	NH := d.cfg.NumHeads
	HD := d.cfg.Channels / NH
	nsplit, r4 := d.decodeSplits(p.nDecode)
	k := d.k.decode
	shape := decodeShape(d.path.warpDecode, NH, nsplit)
	switch {
	case r4:
		k = d.k.decodeSplitsR4
	case shape.splitsKernel:
		k = d.k.decodeSplits
	}
	err := g.launch(k, p.nDecode, shape.gridY, shape.gridZ, shape.threads, shape.smem,
		argPtr(a.attn), argPtr(a.qkv), argPtr(kc), argPtr(vc), argPtr(p.in(lay.blockTables)), argInt(d.cache.maxBlocks),
		argPtr(p.in(lay.qStart)), argPtr(p.in(lay.ctx)), argPtr(p.in(lay.newFrom)), argPtr(p.in(lay.decSeqs)), argInt(NH),
		argInt(d.kv.BlockSizeTokens), argF32(attentionScale(HD)), argInt(nsplit), argPtr(a.attnPart))
	if err == nil && nsplit > 1 && !d.path.warpDecode { // the warp kernel merges its splits itself
		err = g.launch(d.k.combine, p.nDecode, NH, 1, ceilDiv(HD, 32)*32, 0,
			argPtr(a.attn), argPtr(a.attnPart), argPtr(p.in(lay.qStart)), argPtr(p.in(lay.decSeqs)), argInt(NH), argInt(HD), argInt(nsplit))
	}
	s.end("attn_decode", err)
}

// attnPrefill: causal attention of the step's prompt chunks, each over its
// cached prefix and itself, one block per tile of query rows and head.
func (s *step) attnPrefill(l int) {
	lay := &s.p.lay
	if s.err != nil || lay.nTiles == 0 {
		return
	}
	d, a, p := s.d, &s.d.act, s.p
	kc, vc := d.kvLayer(l)
	NH := d.cfg.NumHeads
	s.end("attn_prefill", d.g.launch(d.k.prefill, lay.nTiles, NH, 1, 128, 0, // both prefill kernels use 128 threads
		argPtr(a.attn), argPtr(a.qkv), argPtr(kc), argPtr(vc), argPtr(p.in(lay.blockTables)), argInt(d.cache.maxBlocks),
		argPtr(p.in(lay.qStart)), argPtr(p.in(lay.qLen)), argPtr(p.in(lay.ctx)), argPtr(p.in(lay.tileSeq)), argPtr(p.in(lay.tileQ0)),
		argInt(NH), argInt(d.kv.BlockSizeTokens), argF32(attentionScale(d.cfg.Channels/NH))))
}

// attProjFC: residual += attn @ W_attproj^T + b; fc = GELU(LayerNorm(residual;
// ln_2) @ W_fc^T + b_fc) (fp16). With the fold, both projections carry the
// LayerNorm in their epilogues (foldedLN2).
func (s *step) attProjFC(l int) {
	if s.err != nil {
		return
	}
	d, a, w, C, N := s.d, &s.d.act, &s.d.w.layers[l], s.d.cfg.Channels, s.N
	switch {
	case s.small:
		s.end("gemv_attproj", d.gemv(a.residual, C, a.attn, C, w.attProjW, w.attProjB, N, C, C, gemvResidual))
		if s.err == nil {
			s.end("gemv_ln_fc_gelu", d.gemvLN(a.fc, 4*C, a.residual, 0, w.ln2W, w.ln2B, w.fcW, w.fcB, N, 4*C, gemvOut16BiasGelu, 0))
		}
	case s.fold:
		s.err = d.foldedLN2(l, N, s.pair, s.pairBN, s.pairGrid) // tells the hook of its projections
	default:
		s.end("gemm_attproj", d.residualGemm(a.attn, w.attProjW, w.attProjB, w.attProjB16, N, C))
		if s.err == nil {
			s.err = d.lnProjection(a.fc, 4*C, w.ln2W, w.ln2B, w.fcW, w.fcB, N, 4*C, true, "gemm_fc_gelu")
		}
	}
}

// fcProj: residual += fc @ W_fcproj^T + b_fcproj.
func (s *step) fcProj(l int) {
	if s.err != nil {
		return
	}
	d, a, w, C, N := s.d, &s.d.act, &s.d.w.layers[l], s.d.cfg.Channels, s.N
	if s.small {
		s.end("gemv_fcproj", d.gemv(a.residual, C, a.fc, 4*C, w.fcProjW, w.fcProjB, N, 4*C, C, gemvResidual))
		return
	}
	s.end("gemm_fcproj", d.residualGemm(a.fc, w.fcProjW, w.fcProjB, w.fcProjB16, N, 4*C))
}

// lmHead: logits = LayerNorm(residual; ln_f) @ wte^T at the sampled rows,
// through lmhead.cu (tile maxima for the sampler), gemv.cu or, for more than
// 16 rows, a LayerNorm kernel and cuBLASLt.
func (s *step) lmHead() {
	if s.err != nil {
		return
	}
	d, a, p, lay, M := s.d, &s.d.act, s.p, &s.p.lay, s.M
	switch {
	case d.useGemv(M) && d.path.lmheadOK:
		s.end(opLMHeadTiled, d.lmhead(p.in(lay.sampleRows), M))
		s.tileKeys = a.tileKeys
	case d.useGemv(M):
		// One SM stays free for the sampler (see lmhead).
		s.end(opLMHeadGemv, d.gemvLN(a.logits, d.vocabPadded, a.residual, p.in(lay.sampleRows), d.w.lnfW, d.w.lnfB, d.w.wte, 0, M,
			d.vocabPadded, gemvOut32, 1))
	default:
		s.end("layernorm_f", d.layernorm(a.lnf, a.residual, p.in(lay.sampleRows), d.w.lnfW, d.w.lnfB, M, d.cfg.LayerNormEpsilon))
		if s.err == nil {
			s.end(opLMHeadGemm, d.lmheadGemm(gemmRows(M, d.opts.MaxSeqs)))
		}
	}
}

// sample draws each sampled row's token (temperature, top-k, top-p, the
// banned token; its logprob when asked) into act.outTok and the stage's
// mapped host memory.
func (s *step) sample() {
	if s.err != nil {
		return
	}
	d, a, p, lay, M := s.d, &s.d.act, s.p, &s.p.lay, s.M
	sampler := d.k.sample
	if d.halfLogits(M) {
		sampler = d.k.sampleH
	}
	s.end("sample", d.g.launch(sampler, M, 1, 1, 1024, 0,
		argPtr(a.outTok), argPtr(a.logits), argInt(d.vocabPadded), argInt(d.cfg.VocabSize),
		argPtr(p.in(lay.temp)), argPtr(p.in(lay.topK)), argPtr(p.in(lay.topP)), argPtr(p.in(lay.seedLo)), argPtr(p.in(lay.seedHi)),
		argPtr(p.in(lay.index)), argPtr(p.in(lay.banned)), argPtr(p.in(lay.wantLP)), argPtr(s.tileKeys), argPtr(p.in(lay.hostOut))))
}

// attentionScale is 1/sqrt(HD), the scores' scale.
func attentionScale(HD int) float32 { return float32(1 / math.Sqrt(float64(HD))) }

// halfLogits says whether a step of M sampled rows leaves fp16 logits:
// where the LM head is cuBLASLt's (17+ rows, every step without the GEMV
// kernels). Its sums are fp32 either way; fp16 halves the 25.7 MB of fp32
// logits a step of 128 rows writes and the sampler reads (the LM head is
// near its traffic floor), as vLLM's logits in the model's dtype.
func (d *Device) halfLogits(M int) bool { return d.q3 == nil && !d.useGemv(M) }

// lmheadGemm is cuBLASLt's LM head over rows rows of act.lnf (a gemmRows
// bucket of a step that halfLogits gives fp16 logits): act.logits in fp16.
func (d *Device) lmheadGemm(rows int) error {
	g, a := d.g, &d.act
	return g.blas.gemm(g.stream, a.logits, dataR16F, d.vocabPadded, a.lnf, d.w.wte, 0, rows, d.cfg.Channels, d.vocabPadded, epilogueDefault, false)
}

// foldedLN2 runs layer l's attproj and fc through gemm_wg.cu with the
// LayerNorm between them folded into their epilogues (gemm_wg.cu's WG_LN):
// attproj leaves x * ln2W in act.ln and the rows' statistics in act.lnStats.
// With pair both run as one gemm_wg_pair grid (pairShape's bnB and grid).
func (d *Device) foldedLN2(l, N int, pair bool, bnB, grid int) error {
	a, w, C := &d.act, &d.w.layers[l], d.cfg.Channels
	ln := wgLNArgs{lns: w.ln2W, stats: d.lnStatsAt(l, N), x16: a.ln, eps: d.cfg.LayerNormEpsilon}
	if pair {
		if err := d.wgPair(l, N, bnB, grid, ln.stats); err != nil {
			return err
		}
		return d.opDone("gemm_attproj_fc")
	}
	if err := d.foldedProjection(a.residual, a.attn, w.attProjW, w.attProjB, N, C, wgResidualLNStats, ln, "gemm_attproj"); err != nil {
		return err
	}
	ln.lns, ln.x16 = w.fcLNs, 0
	return d.foldedProjection(a.fc, a.ln, w.fcW, w.fcLNb, N, 4*C, wgOut16LNFoldGelu, ln, "gemm_fc_gelu")
}

// lnStatsWords is act.lnStats's length in 32-bit words for a step of N
// rows: every layer's row statistics (two floats a row, lnStatsAt), then
// gemm_wg_pair's barrier counters (one a layer, pairCounter). A step
// zeroes them all.
func lnStatsWords(L, N int) int { return 2*L*N + L }

func (d *Device) lnStatsAt(l, N int) devPtr { return d.act.lnStats + devPtr(4*2*N*l) }

func (d *Device) pairCounter(l, N int) devPtr {
	return d.act.lnStats + devPtr(4*(2*d.cfg.NumLayers*N+l))
}

// foldedProjection writes out (N x oc, rows of oc) = x (N x C) @ w^T
// through gemm_wg.cu with a LayerNorm fold epilogue (mode, ln; bias32 as
// the mode takes it) and tells the hook name is done. lnFold chose the fold
// for N rows, so gemm_wg.cu declining the projection is a bug.
func (d *Device) foldedProjection(out, x, w, bias32 devPtr, N, oc, mode int, ln wgLNArgs, name string) error {
	ok, err := d.wgLN(out, oc, x, w, 0, bias32, N, d.cfg.Channels, oc, mode, ln)
	if err == nil && !ok {
		err = fmt.Errorf("cuda: LayerNorm fold: gemm_wg.cu did not take the %d x %d projection (mode %d) at %d rows", d.cfg.Channels, oc, mode, N)
	}
	if err != nil {
		return err
	}
	return d.opDone(name)
}

// layernorm runs LN over R rows of inp (rows = 0: the first R rows; else an
// index list) into fp16 out. One warp per row, 4 rows per block (small
// blocks spread a decode step's few rows over more SMs).
func (d *Device) layernorm(out, inp, rows, w, b devPtr, R int, eps float32) error {
	return d.g.launch(d.k.layerNorm, ceilDiv(R, 4), 1, 1, 128, 0,
		argPtr(out), argPtr(inp), argPtr(rows), argPtr(w), argPtr(b), argInt(R), argInt(d.cfg.Channels), argF32(eps))
}

// residualGemm adds inp @ w^T + bias into the fp32 residual stream (cuBLASLt
// runs over gemmRows(N) rows; the padding rows are never read). The add
// is fused into the GEMM (beta = 1, fp32 output) unless cuBLASLt offers no
// algorithm for that type mix, in which case it writes fp16 and a small
// kernel adds it.
func (d *Device) residualGemm(inp, w, bias32, bias16 devPtr, N, K int) error {
	g, C := d.g, d.cfg.Channels
	if d.useSkinny(N) {
		return d.skinny(d.act.residual, C, inp, K, w, 0, bias32, N, K, C, gemvResidual)
	}
	if ok, err := d.wg(d.act.residual, C, inp, w, 0, bias32, N, K, C, gemvResidual); ok || err != nil {
		return err
	}
	rows := gemmRows(N, d.opts.MaxStepTokens) // a bucket prewarm planned
	if !d.path.noFusedResidual {
		err := g.blas.gemm(g.stream, d.act.residual, dataR32F, C, inp, w, bias32, rows, K, C, epilogueBias, true)
		if err == nil {
			return nil
		}
		if d.path.residualTried {
			return err
		}
		d.path.noFusedResidual = true // no fp16-in/fp32-out algorithm: fall back for good
	}
	d.path.residualTried = true
	if err := g.blas.gemm(g.stream, d.act.delta, dataR16F, C, inp, w, bias16, rows, K, C, epilogueBias, false); err != nil {
		return err
	}
	return g.launch(d.k.residualAdd, ceilDiv(N*C, 256), 1, 1, 256, 0, argPtr(d.act.residual), argPtr(d.act.delta), argInt(N*C))
}

// lnProjection writes out(N, oc) fp16 = LayerNorm(residual; lnW, lnB) @ w^T
// + bias16 [then GELU] through a LayerNorm kernel into act.ln and
// projection, then tells the hook name (the projection) is done.
func (d *Device) lnProjection(out devPtr, ldo int, lnW, lnB, w, bias16 devPtr, N, oc int, gelu bool, name string) error {
	if err := d.layernorm(d.act.ln, d.act.residual, 0, lnW, lnB, N, d.cfg.LayerNormEpsilon); err != nil {
		return err
	}
	if err := d.opDone("layernorm"); err != nil {
		return err
	}
	if err := d.projection(out, ldo, d.act.ln, w, bias16, N, d.cfg.Channels, oc, gelu); err != nil {
		return err
	}
	return d.opDone(name)
}

// projection writes out(N, oc) fp16 = inp(N, K) @ w^T + bias16 [then GELU]
// through gemm_skinny.cu, gemm_wg.cu or cuBLASLt (over gemmRows(N) rows, see
// prewarm.go).
func (d *Device) projection(out devPtr, ldo int, inp, w, bias16 devPtr, N, K, oc int, gelu bool) error {
	mode := gemvOut16Bias
	if gelu {
		mode = gemvOut16BiasGelu
	}
	if d.useSkinny(N) {
		return d.skinny(out, ldo, inp, K, w, bias16, 0, N, K, oc, mode)
	}
	if ok, err := d.wg(out, ldo, inp, w, bias16, 0, N, K, oc, mode); ok || err != nil {
		return err
	}
	epi := epilogueBias
	if gelu {
		epi = epilogueGeluBias
	}
	return d.g.blas.gemm(d.g.stream, out, dataR16F, ldo, inp, w, bias16, gemmRows(N, d.opts.MaxStepTokens), K, oc, epi, false)
}

// decodeSplits is how many key slices each (sequence, head) of a decode step
// is split into: enough blocks to give every SM four (block kernel) or
// enough warps to give every SM eight (warp kernel), at most
// maxDecodeSplits. Where that is 8 or fewer, the largest power of two up
// to 8 that gives every SM at most decodeWarpsPerSM warps, run by the
// 80-register kernel (r4). It depends on the batch size only, so a captured
// graph stays valid.
func (d *Device) decodeSplits(nDecode int) (nsplit int, r4 bool) {
	units := nDecode * d.cfg.NumHeads
	target := 4 * d.g.smCount
	if d.path.warpDecode {
		target = 8 * d.g.smCount
	}
	nsplit = 1
	if units < target {
		nsplit = min(maxDecodeSplits, ceilDiv(target, units))
	}
	if w := decodeWarpsPerSM; d.path.warpDecode && nsplit <= r4MaxSplits && units > 0 {
		// A power of two: 5 splits at batch 48 (64-key slices, the last
		// short) took 0.684-0.692 ms a step, 4 splits 0.626-0.632.
		n := 1
		for 2*n <= min(r4MaxSplits, w*d.g.smCount/units) {
			n *= 2
		}
		if n >= 2 && n >= nsplit {
			return n, true
		}
	}
	return nsplit, false
}

// decodeLaunch is how one decode-attention launch covers its (sequence,
// head) pairs: grid (decode sequences, gridY, gridZ) of threads each.
type decodeLaunch struct {
	gridY, gridZ, threads int
	smem                  int  // dynamic shared memory a block (the splits' partials)
	splitsKernel          bool // attention_decode_warp_splits_64
}

// decodeShape: the block kernel (attention.cu) takes a block per (sequence,
// head, split) and its combine kernel merges the splits; the warp kernels
// take a warp per (sequence, head) and warpDecodeHeads heads a block
// without splits, or a block per (sequence, head) with a warp per split,
// merged in shared memory.
func decodeShape(warp bool, NH, nsplit int) decodeLaunch {
	switch {
	case !warp:
		return decodeLaunch{gridY: NH, gridZ: nsplit, threads: 256}
	case nsplit == 1:
		return decodeLaunch{gridY: ceilDiv(NH, warpDecodeHeads), gridZ: 1, threads: 32 * warpDecodeHeads}
	default:
		return decodeLaunch{gridY: NH, gridZ: 1, threads: 32 * nsplit, smem: max(nsplit*(warpDecodeHeadDim+2)*4, decodeSplitsSmem), splitsKernel: true}
	}
}

const (
	// decodeWarpsPerSM: decode steps whose (sequence, head) pairs take 8
	// key splits or fewer and leave room for 2 (batch 11-132 on the H100,
	// GPT-2's 12 heads) split them for up to this many warps an SM through
	// the 80-register kernel: batch 16-128 2-5% faster on the H100 than 8
	// warps an SM through the 128-register kernels.
	decodeWarpsPerSM  = 24
	r4MaxSplits       = 8  // attention_decode_warp_splits_r4_64: at most 256 threads a block
	maxDecodeSplits   = 16 // AW_MAX_SPLITS in attention_warp.cu merges up to this many
	warpDecodeHeads   = 4  // AW_WARPS in attention_warp.cu
	warpDecodeHeadDim = 64 // the warp kernels' head size
	// decodeSplitsSmem is the least shared memory a block of the splits
	// kernels asks for, far more than its partials need: it caps how many of
	// the blocks, launched early (PDL), sit beside the qkv projection's
	// block on an SM. Each issues its first KV loads there before its grid
	// wait, and a dozen of them slow qkv down. 9 KB leaves room for 5 beside
	// a 48-column tile at 128 rows (174 KB) and 8 beside a 32-column one at
	// 64 rows (148 KB), and still 12 (24 warps) on an SM of their own.
	// Against 4.2 KB (the partials' static size), overlapped step on the
	// H100: batch 24 -2, 48 -6 to -14 us, 64 -7, 96 -3; batch 1, 16, 32
	// and 128 within noise; batch 12 +3 us. 0.5 KB and 17 KB both lose at
	// 96-128 (docs/cuda.md).
	decodeSplitsSmem = 9000
)

// kvLayer returns layer l's K and V cache bases within the one KV allocation.
func (d *Device) kvLayer(l int) (k, v devPtr) {
	k = d.cache.base + devPtr(2*l)*devPtr(d.cache.layerBytes)
	return k, k + devPtr(d.cache.layerBytes)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func (d *Device) resolveKernels() error {
	HD := d.cfg.Channels / d.cfg.NumHeads
	switch HD {
	case 32, 64, 128:
	default:
		return fmt.Errorf("cuda: head size %d not supported (32, 64 or 128)", HD)
	}
	if d.cfg.Channels > 2048 {
		return fmt.Errorf("cuda: %d channels > 2048 (layernorm.cu keeps a row in registers)", d.cfg.Channels)
	}
	get := func(dst *kernel, name string) error {
		k, ok := d.g.kernels[name]
		if !ok {
			return fmt.Errorf("cuda: kernel %s not loaded", name)
		}
		*dst = k
		return nil
	}
	d.path.prefillTile = prefillTileRows
	prefillName := fmt.Sprintf("attention_prefill_%d", HD)
	if HD == 64 && !d.opts.force.simplePrefill {
		d.path.prefillTile, prefillName = prefillTileRowsMMA, "attention_prefill_mma_64"
	}
	d.path.warpDecode = HD == 64 && !d.opts.force.blockDecode
	decodeName := fmt.Sprintf("attention_decode_%d", HD)
	if d.path.warpDecode {
		decodeName = "attention_decode_warp_64"
	}
	if err := get(&d.k.decodeSplits, "attention_decode_warp_splits_64"); err != nil {
		return err
	}
	if err := get(&d.k.decodeSplitsR4, "attention_decode_warp_splits_r4_64"); err != nil {
		return err
	}
	for dst, name := range map[*kernel]string{
		&d.k.encoder: "encoder_forward", &d.k.combine: "attention_decode_combine", &d.k.layerNorm: "layernorm_forward",
		&d.k.residualAdd: "residual_add", &d.k.kvWrite: "kv_write", &d.k.sample: "sample_rows", &d.k.sampleH: "sample_rows_h",
		&d.k.decode: decodeName, &d.k.prefill: prefillName,
	} {
		if err := get(dst, name); err != nil {
			return err
		}
	}
	// gemv.cu stages LayerNorm rows of up to 1024 channels and reads K in
	// 32-wide chunks, rows in 16-byte pieces of 4 channels.
	d.path.gemvOK = d.cfg.Channels%128 == 0 && d.cfg.Channels <= gemvMaxChannels && !d.opts.force.cuBLASLt
	d.path.skinnyRows, d.path.wgRows = skinnyGemmRows, wgGemmRows
	if err := d.resolveSkinny(get); err != nil {
		return err
	}
	if err := d.resolveLMHead(get); err != nil {
		return err
	}
	if err := d.resolveWG(); err != nil {
		return err
	}
	for ln := 0; ln < 2; ln++ {
		for big := 0; big < 2; big++ {
			for nt := 0; nt < 2; nt++ {
				if err := get(&d.k.gemv[ln][big][nt], gemvKernelName(ln == 1, big == 1, nt == 1)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// resolveSkinny lets gemm_skinny's kernels have the shared memory their
// pipelines need on GPUs with thread-block clusters (compute capability
// 9+); elsewhere the projections stay on cuBLASLt.
func (d *Device) resolveSkinny(get func(*kernel, string) error) error {
	d.path.skinnyOK = false
	if !d.path.gemvOK || d.g.ccMajor < 9 || d.cfg.Channels%skinnyTileK != 0 {
		return nil
	}
	for _, sk := range skinnyKernels {
		var k kernel
		if err := get(&k, sk.name); err != nil {
			return err
		}
		if sk.smem() > d.g.smemOptIn {
			return nil // too little shared memory: cuBLASLt
		}
		if err := d.g.setMaxDynamicSmem(k, sk.smem()); err != nil {
			return err
		}
	}
	d.path.skinnyOK = true
	return nil
}
