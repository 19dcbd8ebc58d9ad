package cuda

import (
	"cmp"
	"fmt"
	"math"
	"unsafe"

	"github.com/roseinfer/roseinfer/engine/model"
)

// The rotary block (Qwen3's; qwen3_lower.go) runs on bf16 weights and
// activations with an fp32 residual stream: q3_gemv.cu's GEMVs with the
// norms and SwiGLU folded in for steps of up to maxGemvRows rows
// (qwen3_gemv.go), on Hopper q3_wg.cu's TMA + wgmma projections up to
// rotaryWGRows (q3_wg.go), cuBLASLt for the rest and for the LM head of
// larger steps (bf16 operands, fp32 accumulate; o_proj and down_proj add
// into the residual with beta = 1), and qwen3.cu's kernels between them.
// Every row of a step, prompt chunk or decode token, writes its keys and
// values into the paged cache first (q3_qk_rope_kv) and then attends over
// its sequence's cache (q3_attn_rows), so one attention kernel serves
// prefill, chunks, prefix hits and decode, and a graph of a decode batch
// replays for any context lengths. The plan, staging, graphs, overlap,
// sampling rules and spans are the device's, shared with GPT-2's step.

// rotaryState is the rotary block's part of a Device (nil for GPT-2's).
type rotaryState struct {
	w                        rotaryWeights
	act                      rotaryActs
	k                        rotaryKernels
	NH, NKV, HD, I, qkvWidth int
	eps                      float32
	gemvOK                   bool       // steps of up to maxGemvRows rows run q3_gemv.cu (qwen3_gemv.go)
	wg                       rotaryWG   // steps of up to rotaryWGRows rows run q3_wg.cu on Hopper (q3_wg.go)
	prefillSmem              int        // k.attnPrefill's dynamic shared memory
	attnMaps                 wgMaps     // q3_attn_prefill_wg's tensor maps of each layer's keys and values (usePrefillWG)
	normRowsMin              int        // steps of more rows normalise through k.rmsnormRows (MaxInt: none)
	pf                       kvPrefetch // the decode attention's keys and values asked for ahead (kvprefetch.go)
	fp32Logits               bool       // cuBLASLt's LM head writes fp32 logits too (logitsType)
	ws                       wgMaps     // q3_gemm_ws.cu's tensor maps (q3_gemm_ws.go); nil maps where it is off
	wsLaunches               int        // q3_gemm_ws.cu's gate|up launches enqueued or captured (tests check that the path ran)
	wsQKVLaunches            int        // and its q|k|v launches
	// f32 (Options.Float32): weights, activations and the KV cache in fp32
	// through q3_f32.cu's kernels and cuBLASLt alone; the buffers and
	// weights documented as bf16 below are fp32 then.
	f32 bool
}

// logitsType is the cuBLASLt data type of the logits a step of M sampled
// rows leaves: bf16 where cuBLASLt's LM head writes them (more than
// maxGemvRows rows of the bf16 mode; its sums stay fp32), fp32 from
// q3_gemv.cu's LM head and in the fp32 mode. A row of 151,936 fp32 logits
// is 608 KB: at 128 rows the LM head writes 78 MB that the sampler reads
// twice, and bf16 halves both (vLLM's logits are in the model's dtype too).
func (q *rotaryState) logitsType(M int) int {
	if q.f32 || q.fp32Logits || q.useGemv(M) {
		return dataR32F
	}
	return dataR16BF
}

// actType is the cuBLASLt data type of the block's activations and
// weights (CUDA_R_16BF, or CUDA_R_32F in fp32 mode).
func (q *rotaryState) actType() int {
	if q.f32 {
		return dataR32F
	}
	return dataR16BF
}

// actBytes is the size of one activation, weight or cached key element.
func (q *rotaryState) actBytes() int { return rotaryElemBytes(q.f32) }

// rotaryElemBytes is the rotary block's element size: 2 (bf16) or, in the
// fp32 mode, 4.
func rotaryElemBytes(f32 bool) int {
	if f32 {
		return 4
	}
	return 2
}

type rotaryWeights struct {
	base     devPtr
	wte      devPtr // (Vp, C) bf16, rows V.. zero: the embedding and the tied LM head
	normF    devPtr // (C) fp32
	invFreq  devPtr // (HD/2) fp32
	layers   []rotaryLayer
	numBytes int
}

type rotaryLayer struct {
	ln1, ln2, qNorm, kNorm devPtr // fp32
	qkv, o, gateUp, down   devPtr // bf16 (out, in)
}

// rotaryActs are the block's buffers beside Device.act's residual (fp32),
// logits (fp32, or bf16: logitsType) and outTok.
type rotaryActs struct {
	norm   devPtr // (N, C) bf16
	qkv    devPtr // (N, (NH + 2 NKV) HD) bf16
	att    devPtr // (N, NH HD) bf16
	gateUp devPtr // (N, 2I) bf16
	hidden devPtr // (N, I) bf16
	lnf    devPtr // (M, C) bf16
	part   devPtr // (M, NH, maxDecodeSplits, HD + 2) fp32: split attention partials
	rope   devPtr // (N, HD/2) float2: the step's (cos, sin), filled by q3_embed
}

type rotaryKernels struct {
	embed, rmsnorm, rope, swiglu, attnRows, attnRowsRope, attnPrefill, combine, sample, sampleBF, kvPrefetch kernel
	rmsnormRows                                                                                              kernel          // a warp a row, for steps of more than normRowsMin rows
	gemv                                                                                                     [2][2][2]kernel // [q3Gemv*][rows > 8][2 column tiles]
}

// rotaryKernelNames are qwen3.cu's, q3_gemv.cu's, q3_f32.cu's and sample_large.cu's kernels.
var rotaryKernelNames = append([]string{"q3_embed", "q3_rmsnorm", "q3_rmsnorm_rows", "q3_qk_rope_kv", "q3_swiglu", "q3_attn_combine",
	"q3_attn_rows", "q3_attn_rows_rope", "q3_attn_prefill", "q3_kv_prefetch", "sample_rows_large", "sample_rows_large_bf"},
	append(q3GemvKernelNames(), rotaryF32Kernels...)...)

// rotaryF32Kernels are q3_f32.cu's kernels, each taking its bf16
// namesake's arguments (in the order of rotaryKernels' fields).
var rotaryF32Kernels = []string{"q3f_embed", "q3f_rmsnorm", "q3f_qk_rope_kv", "q3f_swiglu", "q3f_attn_rows", "q3f_attn_prefill"}

// sampleLargeSmem is SAMPLE_DYNAMIC_SMEM in sample_large.cu.
const sampleLargeSmem = 98304

// initRotary is init for the rotary block: kernels, weights, buffers.
func (d *Device) initRotary(w *model.Weights, lr loweredRotary) error {
	g, c := d.g, d.cfg
	q := &rotaryState{NH: c.NumHeads, NKV: c.NumKVHeads, HD: c.HeadDim, I: c.Intermediate, eps: lr.eps, f32: d.opts.Float32}
	q.qkvWidth = (q.NH + 2*q.NKV) * q.HD
	d.q3 = q
	get := func(dst *kernel, name string) error {
		k, ok := g.kernels[name]
		if !ok {
			return fmt.Errorf("cuda: kernel %s not loaded", name)
		}
		*dst = k
		return nil
	}
	for dst, name := range map[*kernel]string{
		&q.k.embed: "q3_embed", &q.k.rmsnorm: "q3_rmsnorm", &q.k.rope: "q3_qk_rope_kv", &q.k.swiglu: "q3_swiglu",
		&q.k.combine: "q3_attn_combine", &q.k.attnRows: "q3_attn_rows", &q.k.attnRowsRope: "q3_attn_rows_rope",
		&q.k.attnPrefill: "q3_attn_prefill", &q.k.sample: "sample_rows_large", &q.k.sampleBF: "sample_rows_large_bf",
		&q.k.kvPrefetch: "q3_kv_prefetch", &q.k.rmsnormRows: "q3_rmsnorm_rows",
	} {
		if err := get(dst, name); err != nil {
			return err
		}
	}
	q.normRowsMin = cmp.Or(d.opts.force.normRowsMin, rotaryNormRowsMin)
	if q.f32 || q.normRowsMin < 0 { // fp32 mode has no q3_rmsnorm_rows
		q.normRowsMin = math.MaxInt
	}
	if q.f32 {
		for i, dst := range []*kernel{&q.k.embed, &q.k.rmsnorm, &q.k.rope, &q.k.swiglu, &q.k.attnRows, &q.k.attnPrefill} {
			if err := get(dst, rotaryF32Kernels[i]); err != nil {
				return err
			}
		}
	}
	for input := range 2 {
		for big := range 2 {
			for nt := range 2 {
				if err := get(&q.k.gemv[input][big][nt], q3GemvKernelName(input, big, nt)); err != nil {
					return err
				}
			}
		}
	}
	q.gemvOK = rotaryGemvOK(c.Channels, q.NH*q.HD, q.I) && !d.opts.force.cuBLASLt && !q.f32
	q.fp32Logits = d.opts.force.rotaryFP32Logits
	for _, k := range []kernel{q.k.sample, q.k.sampleBF} {
		if err := g.setMaxDynamicSmem(k, sampleLargeSmem); err != nil {
			return err
		}
	}
	q.prefillSmem = rotaryPrefillSmem
	if q.f32 {
		q.prefillSmem = 0
	}
	if err := g.setMaxDynamicSmem(q.k.attnPrefill, rotaryPrefillSmem); err != nil {
		return err
	}
	if b := d.kv.BlockSizeTokens; b&(b-1) != 0 {
		// Its attention shifts and masks positions by it (kv_block, kv_slot).
		return fmt.Errorf("cuda: the rotary block needs a power-of-two KV block size (--block-size 16, 32, ...), got %d", b)
	}
	if c.VocabSize > 262144 {
		return fmt.Errorf("cuda: a vocabulary of %d ids is more than the sampler's 262,144", c.VocabSize)
	}
	d.path.prefillTile = rotaryPrefillRows
	var err error
	if q.w, err = uploadRotaryWeights(g, w, lr, q.f32); err != nil {
		return err
	}
	N, M, C := d.opts.MaxStepTokens, d.opts.MaxSeqs, c.Channels
	d.vocabPadded = paddedVocab(c.VocabSize)
	d.cache.maxBlocks = ceilDiv(c.MaxSeqLen, d.kv.BlockSizeTokens)
	inWords := newLayout(N, M, ceilDiv(N, d.path.prefillTile)+M, M, d.cache.maxBlocks).total
	e := q.actBytes()
	for _, b := range []struct {
		p     *devPtr
		bytes int
	}{
		{&d.act.residual, 4 * N * C}, {&d.act.logits, 4 * M * d.vocabPadded}, {&d.act.outTok, 4 * M},
		{&q.act.norm, e * N * C}, {&q.act.qkv, e * N * q.qkvWidth}, {&q.act.att, e * N * q.NH * q.HD},
		{&q.act.gateUp, e * N * 2 * q.I}, {&q.act.hidden, e * N * q.I}, {&q.act.lnf, e * M * C},
		{&q.act.part, 4 * M * q.NH * maxDecodeSplits * (q.HD + 2)}, {&q.act.rope, 8 * N * q.HD / 2},
	} {
		if *b.p, err = g.drv.memAlloc(b.bytes); err != nil {
			return fmt.Errorf("cuda: activations: %w", err)
		}
	}
	if !q.f32 { // fp32 mode runs no q3_wg.cu
		if err := d.resolveRotaryWG(); err != nil {
			return err
		}
		if err := d.resolveRotaryGemmWS(); err != nil {
			return err
		}
	}
	if err := d.allocStages(inWords); err != nil {
		return err
	}
	if err := d.initKVPrefetch(); err != nil {
		return err
	}
	g.blas.scratch, g.blas.scratchBytes = d.act.logits, 4*M*d.vocabPadded
	if err := d.allocKV(); err != nil {
		return err
	}
	return d.usePrefillWG()
}

// freeRotary frees what initRotary allocated beyond Device.act.
func (d *Device) freeRotary() {
	q := d.q3
	for _, p := range []devPtr{q.act.norm, q.act.qkv, q.act.att, q.act.gateUp, q.act.hidden, q.act.lnf, q.act.part, q.act.rope, q.w.base} {
		d.g.drv.memFree(p)
	}
	q.act, q.w.base = rotaryActs{}, 0
	q.freeRotaryWG()
	q.attnMaps.free()
	q.ws.free()
	q.freeKVPrefetch(d.g.drv)
}

// bf16 appends src rounded to bf16 (nearest, ties to even): exact for a
// checkpoint stored in bf16.
func (h *hostImage) bf16(src []float32) devPtr { return h.half(src, f32ToBF16) }

// f32ToBF16 rounds to the nearest bf16, ties to even; NaN stays NaN.
func f32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// uploadRotaryWeights lays the tensors lr names out as rotaryWeights and
// copies them in one transfer; with f32 the projections and the embedding
// stay fp32 (exact for a checkpoint in bf16).
func uploadRotaryWeights(g *gpu, w *model.Weights, lr loweredRotary, f32 bool) (rotaryWeights, error) {
	c := w.Config
	t := map[string][]float32{}
	for _, name := range []string{lr.tokenEmbedding, lr.normF, lr.ln1, lr.qkv, lr.qNorm, lr.kNorm, lr.o, lr.ln2, lr.gateUp, lr.down} {
		x, err := w.Tensor(name)
		if err != nil {
			return rotaryWeights{}, fmt.Errorf("cuda: %w", err)
		}
		t[name] = x.Data
	}
	L, C := c.NumLayers, c.Channels
	elem := rotaryElemBytes(f32)
	h := &hostImage{buf: make([]byte, 0, elem*c.NumParameters()+elem*(paddedVocab(c.VocabSize)-c.VocabSize)*C+64<<10)}
	mat := h.bf16
	if f32 {
		mat = h.f32
	}
	var rw rotaryWeights
	rw.wte = mat(t[lr.tokenEmbedding])
	h.buf = append(h.buf, make([]byte, elem*(paddedVocab(c.VocabSize)-c.VocabSize)*C)...)
	rw.normF = h.f32(t[lr.normF])
	half := c.HeadDim / 2
	inv := make([]float32, half)
	for j := range inv { // as transformers computes them in fp32 (and the CPU device's rope.go)
		inv[j] = float32(1 / math.Pow(lr.theta, float64(2*j)/float64(c.HeadDim)))
	}
	rw.invFreq = h.f32(inv)
	slice := func(name string, l int) []float32 { x := t[name]; n := len(x) / L; return x[l*n : (l+1)*n] }
	rw.layers = make([]rotaryLayer, L)
	for l := range rw.layers {
		ly := &rw.layers[l]
		ly.ln1, ly.ln2 = h.f32(slice(lr.ln1, l)), h.f32(slice(lr.ln2, l))
		ly.qNorm, ly.kNorm = h.f32(slice(lr.qNorm, l)), h.f32(slice(lr.kNorm, l))
		ly.qkv, ly.o = mat(slice(lr.qkv, l)), mat(slice(lr.o, l))
		ly.gateUp, ly.down = mat(interleaveHalves(slice(lr.gateUp, l), C)), mat(slice(lr.down, l))
	}
	h.align()
	base, err := g.drv.memAlloc(len(h.buf))
	if err != nil {
		return rw, fmt.Errorf("cuda: weights (%d MB): %w", len(h.buf)>>20, err)
	}
	if err := g.drv.htod(base, unsafe.Pointer(&h.buf[0]), len(h.buf)); err != nil {
		g.drv.memFree(base)
		return rw, err
	}
	rw.base, rw.numBytes = base, len(h.buf)
	for _, p := range []*devPtr{&rw.wte, &rw.normF, &rw.invFreq} {
		*p += base
	}
	for l := range rw.layers {
		ly := &rw.layers[l]
		for _, p := range []*devPtr{&ly.ln1, &ly.ln2, &ly.qNorm, &ly.kNorm, &ly.qkv, &ly.o, &ly.gateUp, &ly.down} {
			*p += base
		}
	}
	return rw, nil
}

// interleaveHalves reorders the rows (of width cols) of a stacked gate|up
// weight, gate rows 0..I then up rows I..2I, as pairs: row 2j is gate j,
// row 2j+1 up j. The gate|up projection's output then holds each SwiGLU
// input pair side by side (q3_gemv.cu's epilogue, q3_swiglu).
func interleaveHalves(x []float32, cols int) []float32 {
	I := len(x) / cols / 2
	out := make([]float32, len(x))
	for j := range I {
		copy(out[2*j*cols:(2*j+1)*cols], x[j*cols:(j+1)*cols])
		copy(out[(2*j+1)*cols:(2*j+2)*cols], x[(I+j)*cols:(I+j+1)*cols])
	}
	return out
}

// forwardRotary enqueues one step of the rotary block: forward's contract.
func (d *Device) forwardRotary(p *stepPlan) error {
	s := rotaryStep{d: d, q: d.q3, p: p, N: p.lay.nTok, M: p.lay.nSample}
	s.ropeInAttention = d.foldsRope(p)
	s.prefetch = s.prefetchesKV()
	s.end("start", nil)
	s.embed()
	s.prefetchKV(0)
	switch {
	case s.useGemv(s.N):
		s.layersGemv()
	case s.useWG(s.N):
		s.layersWG()
	default:
		s.layersGemm()
	}
	s.joinKV()
	if s.M > 0 { // only the rows that sample go through the final norm and the LM head
		if s.useGemv(s.M) {
			s.gemv(opLMHeadGemv, q3GemvRMS, d.act.logits, d.vocabPadded, d.act.residual, 0, p.in(p.lay.sampleRows), s.q.w.normF,
				s.q.w.wte, s.M, d.cfg.Channels, d.vocabPadded, gemvOut32)
		} else {
			s.rmsnorm("rmsnorm_f", s.q.act.lnf, p.in(p.lay.sampleRows), s.q.w.normF, s.M)
			if s.err == nil {
				s.end(opLMHeadGemm, d.g.blas.gemmTyped(d.g.stream, d.act.logits, s.q.logitsType(s.M), d.vocabPadded, s.q.act.lnf, s.q.w.wte, s.q.actType(), 0,
					gemmRows(s.M, d.opts.MaxSeqs), d.cfg.Channels, d.vocabPadded, epilogueDefault, false))
			}
		}
		s.sample()
	}
	return s.err
}

// layersGemv enqueues the layers of a small step (qwen3_gemv.go): the norms
// and SwiGLU folded into the projections.
func (s *rotaryStep) layersGemv() {
	d, q, C := s.d, s.q, s.d.cfg.Channels
	for l := range q.w.layers {
		w := &q.w.layers[l]
		s.gemv("gemv_rms_qkv", q3GemvRMS, q.act.qkv, q.qkvWidth, d.act.residual, 0, 0, w.ln1, w.qkv, s.N, C, q.qkvWidth, gemvOut16)
		s.qkRopeKV(l, w)
		s.attention(l, w)
		s.gemv("gemv_o", q3GemvPlain, d.act.residual, C, q.act.att, q.NH*q.HD, 0, 0, w.o, s.N, q.NH*q.HD, C, gemvAdd)
		s.gemv("gemv_rms_gate_up_swiglu", q3GemvRMS, q.act.hidden, 2*q.I, d.act.residual, 0, 0, w.ln2, w.gateUp, s.N, C, 2*q.I, gemvSwiGLU)
		s.prefetchKV(l + 1)
		s.gemv("gemv_down", q3GemvPlain, d.act.residual, C, q.act.hidden, q.I, 0, 0, w.down, s.N, q.I, C, gemvAdd)
	}
}

// layersGemm enqueues the layers of a larger step: RMSNorm and SwiGLU
// kernels between cuBLASLt's projections, or q3_gemm_ws.cu's q|k|v and
// gate|up with the q/k norm, rotation and cache writes and SwiGLU in their
// epilogues.
func (s *rotaryStep) layersGemm() {
	d := s.d
	for l := range s.q.w.layers {
		w := &s.q.w.layers[l]
		s.rmsnorm("rmsnorm_1", s.q.act.norm, 0, w.ln1, s.N)
		if !s.qkvRopeKV(l, w) {
			s.gemm("gemm_qkv", s.q.act.qkv, s.q.actType(), s.q.act.norm, w.qkv, d.cfg.Channels, s.q.qkvWidth, false)
			s.qkRopeKV(l, w)
		}
		s.attention(l, w)
		s.gemm("gemm_o", d.act.residual, dataR32F, s.q.act.att, w.o, s.q.NH*s.q.HD, d.cfg.Channels, true)
		s.rmsnorm("rmsnorm_2", s.q.act.norm, 0, w.ln2, s.N)
		if !s.gateUpSwiGLU(w) {
			s.gemm("gemm_gate_up", s.q.act.gateUp, s.q.actType(), s.q.act.norm, w.gateUp, d.cfg.Channels, 2*s.q.I, false)
			s.swiglu()
		}
		s.prefetchKV(l + 1)
		s.gemm("gemm_down", d.act.residual, dataR32F, s.q.act.hidden, w.down, s.q.I, d.cfg.Channels, true)
	}
}

// rotaryStep is forwardRotary's step being enqueued (step's pattern: the
// first error sticks and turns later ops into no-ops).
type rotaryStep struct {
	d    *Device
	q    *rotaryState
	p    *stepPlan
	N, M int
	// ropeInAttention (foldsRope): the decode-row attention also normalises,
	// rotates and caches its rows' queries and keys (q3_attn_rows_rope) and
	// q3_qk_rope_kv is not launched.
	ropeInAttention bool
	prefetch        bool // prefetchesKV: each layer forks its KV prefetch (kvprefetch.go)
	forked          bool // a KV prefetch was forked and not yet joined
	err             error
}

func (s *rotaryStep) end(name string, err error) {
	if s.err == nil {
		s.err = err
	}
	if s.err == nil {
		s.err = s.d.opDone(name)
	}
}

func (s *rotaryStep) embed() {
	if s.err != nil {
		return
	}
	d, g, p, lay, C := s.d, s.d.g, s.p, &s.p.lay, s.d.cfg.Channels
	half := s.q.HD / 2
	// The step's first kernel follows the inputs' copy, not a kernel: no PDL.
	err := g.launchOn(g.stream, false, s.q.k.embed, ceilDiv(s.N*max(C, half), 256), 1, 1, 256, 0,
		argPtr(d.act.residual), argPtr(s.q.act.rope), argPtr(p.in(lay.tokens)), argPtr(d.act.outTok), argPtr(p.in(lay.srcRows)),
		argPtr(p.in(lay.pos)), argPtr(s.q.w.invFreq), argPtr(s.q.w.wte), argInt(s.N), argInt(C), argInt(half))
	s.end("embed", err)
}

// rotaryNormRows is Q3_NORM_ROWS in qwen3.cu: rows (a warp each) a block of
// q3_rmsnorm_rows, which takes steps of more than rotaryNormRowsMin rows;
// fewer go through q3_rmsnorm, a block a row (docs/cuda.md has both A/Bs).
const (
	rotaryNormRows    = 8
	rotaryNormRowsMin = 512
)

// rmsnorm: out (R, C) bf16 = RMSNorm(residual rows; w), rows 0..R or the
// index list rows.
func (s *rotaryStep) rmsnorm(name string, out, rows, w devPtr, R int) {
	if s.err != nil {
		return
	}
	k, blocks := s.q.k.rmsnorm, R
	if R > s.q.normRowsMin {
		k, blocks = s.q.k.rmsnormRows, ceilDiv(R, rotaryNormRows)
	}
	s.end(name, s.d.g.launch(k, blocks, 1, 1, 256, 0,
		argPtr(out), argPtr(s.d.act.residual), argPtr(rows), argPtr(w), argInt(R), argInt(s.d.cfg.Channels), argF32(s.q.eps)))
}

// gemm: out (N, oc) = inp (N, k) @ w^T, bf16 operands, over the step's
// gemmRows bucket of rows (prewarm planned it); accumulate adds into an
// fp32 out (the residual).
func (s *rotaryStep) gemm(name string, out devPtr, outType int, inp, w devPtr, k, oc int, accumulate bool) {
	if s.err != nil {
		return
	}
	d := s.d
	s.end(name, d.g.blas.gemmTyped(d.g.stream, out, outType, oc, inp, w, s.q.actType(), 0, gemmRows(s.N, d.opts.MaxStepTokens), k, oc, epilogueDefault, accumulate))
}

// ropeKV is what q3_qk_rope_kv and q3_gemm_ws_qkv's epilogue take besides
// the q|k|v rows: a layer's key and value caches (blocks of B tokens), its
// q_norm and k_norm weights, the step's rotation table and each row's cache
// slot (< 0: none).
type ropeKV struct {
	kc, vc, qNorm, kNorm, rope, slots devPtr
	NH, NKV, B                        int
	eps                               float32
}

// ptrArgs and shapeArgs are its kernel arguments, in the kernels' order
// (q3_qk_rope_kv takes the row count between them).
func (a ropeKV) ptrArgs() []uint64 {
	return []uint64{argPtr(a.kc), argPtr(a.vc), argPtr(a.qNorm), argPtr(a.kNorm), argPtr(a.rope), argPtr(a.slots)}
}

func (a ropeKV) shapeArgs() []uint64 {
	return []uint64{argInt(a.NH), argInt(a.NKV), argInt(a.B), argF32(a.eps)}
}

// launchQKRopeKV launches k (q3_qk_rope_kv or its fp32 form) over rows rows
// of qkv: rotaryRopeHeads heads a warp, four warps a block.
func (g *gpu) launchQKRopeKV(k kernel, qkv devPtr, rows int, a ropeKV) error {
	warps := rows * ceilDiv(a.NH+2*a.NKV, rotaryRopeHeads)
	args := append(append([]uint64{argPtr(qkv)}, a.ptrArgs()...), argInt(rows))
	return g.launch(k, ceilDiv(warps, 4), 1, 1, 128, 0, append(args, a.shapeArgs()...)...)
}

// ropeKV is layer l's ropeKV in this step.
func (s *rotaryStep) ropeKV(l int, w *rotaryLayer) ropeKV {
	kc, vc := s.d.kvLayer(l)
	return ropeKV{kc: kc, vc: vc, qNorm: w.qNorm, kNorm: w.kNorm, rope: s.q.act.rope, slots: s.p.in(s.p.lay.slots),
		NH: s.q.NH, NKV: s.q.NKV, B: s.d.kv.BlockSizeTokens, eps: s.q.eps}
}

// qkRopeKV: q/k RMSNorm and rotation in place, keys and values of every row
// into layer l's cache (in steps with ropeInAttention the attention does it).
func (s *rotaryStep) qkRopeKV(l int, w *rotaryLayer) {
	if s.err != nil || s.ropeInAttention {
		return
	}
	s.end("qk_rope_kv", s.d.g.launchQKRopeKV(s.q.k.rope, s.q.act.qkv, s.N, s.ropeKV(l, w)))
}

// attention: the one-token rows through the decode-row kernel, split over
// key slices where they are few (rotarySplits), and the prompt chunks'
// tiles through the prefill kernel, all over the paged cache.
func (s *rotaryStep) attention(l int, w *rotaryLayer) {
	if s.err != nil {
		return
	}
	d, q, p, lay := s.d, s.q, s.p, &s.p.lay
	kc, vc := d.kvLayer(l)
	scale := float32(math.Log2E / math.Sqrt(float64(q.HD)))
	var err error
	if p.nDecode > 0 {
		nsplit := 1 // q3_f32.cu's row kernel takes every key in one block
		if !q.f32 {
			nsplit = d.rotarySplits(p.nDecode)
		}
		args := []uint64{argPtr(q.act.att), argPtr(q.act.part), argPtr(q.act.qkv), argPtr(kc), argPtr(vc), argPtr(p.in(lay.pos)),
			argPtr(p.in(lay.decSeqs)), argPtr(p.in(lay.decRuns)), argPtr(p.in(lay.qStart)), argPtr(p.in(lay.blockTables)), argPtr(p.in(lay.btStride)),
			argInt(q.NH), argInt(q.NKV), argInt(d.kv.BlockSizeTokens), argF32(scale), argInt(nsplit)}
		k := q.k.attnRows
		if s.ropeInAttention {
			k = q.k.attnRowsRope
			args = append(args, argPtr(w.qNorm), argPtr(w.kNorm), argPtr(q.act.rope), argPtr(p.in(lay.slots)), argF32(q.eps))
		}
		err = d.g.launch(k, p.nDecode, q.NKV, nsplit, 128, 0, args...)
		if err == nil && nsplit > 1 {
			err = d.g.launch(q.k.combine, p.nDecode, q.NH, 1, q.HD, 0, argPtr(q.act.att), argPtr(q.act.part),
				argPtr(p.in(lay.decSeqs)), argPtr(p.in(lay.qStart)), argInt(q.NH), argInt(nsplit))
		}
	}
	if err == nil && lay.nTiles > 0 {
		err = d.g.launchAttnPrefill(q.k.attnPrefill, q.attnMaps, lay.nTiles, q.NH, q.prefillSmem, q.act.att, q.act.qkv, kc, vc,
			argPtr(p.in(lay.qStart)), argPtr(p.in(lay.qLen)), argPtr(p.in(lay.ctx)), argPtr(p.in(lay.tileSeq)), argPtr(p.in(lay.tileQ0)),
			argPtr(p.in(lay.blockTables)), argPtr(p.in(lay.btStride)), argInt(q.NH), argInt(q.NKV), argInt(d.kv.BlockSizeTokens), argF32(scale))
	}
	s.end("attention", err)
}

// rotaryRopeHeads is Q3_ROPE_HEADS in qwen3.cu: heads a warp of
// q3_qk_rope_kv takes.
const rotaryRopeHeads = 4

// rotaryPrefillRows is the query rows of a q3_attn_prefill tile (PF_BR).
const rotaryPrefillRows = 64

// rotaryPrefillSmem is q3_attn_prefill's dynamic shared memory (PF_SMEM):
// two stages of 64 keys and values, rows of 136 bf16.
const rotaryPrefillSmem = 2 * 2 * 64 * 136 * 2

// rotarySplits is how many key slices each (row, KV head) of nDecode
// one-token rows is split into: enough blocks to fill every SM at
// q3_attn_rows' residency (rotaryRowsBlocks), at most maxDecodeSplits. It
// depends on the row count only, so a captured graph stays valid.
func (d *Device) rotarySplits(nDecode int) int {
	units := nDecode * d.q3.NKV
	target := rotaryRowsBlocks * d.g.smCount
	if n := d.opts.force.rowsBlocks; n > 0 {
		target = n * d.g.smCount
	}
	if units >= target {
		return 1
	}
	return min(maxDecodeSplits, ceilDiv(target, units))
}

// ropeFoldMaxRows is the most rows of a decode-only step whose attention
// does q3_qk_rope_kv's work (q3_attn_rows_rope). On the H100 the
// fold took batch 1 from 0.870-0.875 to 0.843-0.845 ms and batch 16 from
// 1.402 to 1.360, was even at 32, and at every size (ropefoldrows=256) batch
// 64 1.980 against 2.004-2.006, batch 128 2.826 against 2.790-2.811 and
// batch 256 4.780 against 4.725-4.742: where the attention is most of the
// step, its blocks' extra start costs more than the launch it saves. With
// the KV prefetch (kvprefetch.go), two rounds against 32 in one binary:
// batch 48 1.706-1.715 ms against 1.728-1.734, 64 1.882-1.888 against
// 1.899-1.906; 80, 96 and 128 folded (ropefoldrows=128) within noise
// (2.078-2.099 against 2.121-2.133, 2.280-2.291 against 2.261-2.276,
// 2.670-2.682 against 2.661-2.733).
const ropeFoldMaxRows = 64

// foldsRope reports whether p's rotary step does the q/k norm and rotation
// in its attention: every row is one sequence's one token, at most
// ropeFoldMaxRows of them (or the lab's limit, or none).
func (d *Device) foldsRope(p *stepPlan) bool {
	limit := ropeFoldMaxRows
	switch {
	case d.q3 == nil || d.q3.f32 || d.opts.force.noRopeInAttention:
		return false
	case d.opts.force.ropeInAttentionRows > 0:
		limit = d.opts.force.ropeInAttentionRows
	}
	return p.decodeOnly() && p.lay.nTok <= limit
}

// rotaryRowsBlocks is Q3_ROWS_BLOCKS in qwen3.cu: q3_attn_rows' blocks an SM.
const rotaryRowsBlocks = 3

func (s *rotaryStep) swiglu() {
	if s.err != nil {
		return
	}
	q := s.q
	gx, gy := q3SwiGLUGrid(s.N, q.I)
	s.end("swiglu", s.d.g.launch(q.k.swiglu, gx, gy, 1, 256, 0,
		argPtr(q.act.hidden), argPtr(q.act.gateUp), argInt(s.N), argInt(q.I)))
}

// q3SwiGLUGrid is q3_swiglu's grid for n rows of i outputs: 256-thread
// blocks of four outputs a thread (two where i is not a multiple of 4)
// across a row, a row a block row, at most maxGridY of them (the kernel
// strides over the rest).
func q3SwiGLUGrid(n, i int) (x, y int) {
	per := 2
	if i%4 == 0 {
		per = 4
	}
	return ceilDiv(i, per*256), min(n, maxGridY)
}

// maxGridY is the most blocks a grid's y dimension may have.
const maxGridY = 65535

// sample: the device's sampling rules (sample.cuh) over logits of up to
// 262,144 ids, fp32 or bf16 (logitsType). Over bf16 logits the greedy rows
// recompute their near-maximal logits in fp32 from the LM head's operands
// (dot_refine), so that bf16 rounding never decides a greedy token.
func (s *rotaryStep) sample() {
	if s.err != nil {
		return
	}
	d, a, p, lay := s.d, &s.d.act, s.p, &s.p.lay
	k := s.q.k.sample
	args := []uint64{argPtr(a.outTok), argPtr(a.logits), argInt(d.vocabPadded), argInt(d.cfg.VocabSize),
		argPtr(p.in(lay.temp)), argPtr(p.in(lay.topK)), argPtr(p.in(lay.topP)), argPtr(p.in(lay.seedLo)), argPtr(p.in(lay.seedHi)),
		argPtr(p.in(lay.index)), argPtr(p.in(lay.banned)), argPtr(p.in(lay.wantLP)), argPtr(0), argPtr(p.in(lay.hostOut))}
	if s.q.logitsType(s.M) == dataR16BF {
		k = s.q.k.sampleBF
		args = append(args, argPtr(s.q.act.lnf), argPtr(s.q.w.wte), argInt(d.cfg.Channels))
	}
	s.end("sample", d.g.launch(k, s.M, 1, 1, 1024, sampleLargeSmem, args...))
}

// prewarmRotaryGEMMs plans (and tunes) the block's GEMMs at every row
// bucket, as prewarm does GPT-2's.
func (d *Device) prewarmRotaryGEMMs() error {
	q, g, C := d.q3, d.g, d.cfg.Channels
	w := &q.w.layers[0]
	cublas := func(n int) bool { return !q.useGemv(n) } // smaller steps run q3_gemv.cu
	// Steps q3_wg.cu takes whole need no plan (their LM head, of fewer rows,
	// may); above rotaryWGOneSliceRows rows they need q|k|v's and gate|up's.
	layers := func(n int) bool { return cublas(n) && (!q.wg.ok || n > d.rotaryOneSliceRows()) }
	for _, n := range gemmBuckets(d.opts.MaxStepTokens, layers) {
		for _, m := range []struct {
			name        string
			out, in, w  devPtr
			outType     int
			k, oc       int
			accumulates bool
		}{
			{"qkv", q.act.qkv, q.act.norm, w.qkv, q.actType(), C, q.qkvWidth, false},
			{"o_proj", d.act.residual, q.act.att, w.o, dataR32F, q.NH * q.HD, C, true},
			{"gate_up", q.act.gateUp, q.act.norm, w.gateUp, q.actType(), C, 2 * q.I, false},
			{"down", d.act.residual, q.act.hidden, w.down, dataR32F, q.I, C, true},
		} {
			if err := g.blas.gemmTyped(g.stream, m.out, m.outType, m.oc, m.in, m.w, q.actType(), 0, n, m.k, m.oc, epilogueDefault, m.accumulates); err != nil {
				return fmt.Errorf("cuda: prewarm %s GEMM of %d rows: %w", m.name, n, err)
			}
		}
	}
	for _, m := range gemmBuckets(d.opts.MaxSeqs, cublas) {
		if err := g.blas.gemmTyped(g.stream, d.act.logits, q.logitsType(m), d.vocabPadded, q.act.lnf, q.w.wte, q.actType(), 0, m, C, d.vocabPadded, epilogueDefault, false); err != nil {
			return fmt.Errorf("cuda: prewarm LM head GEMM of %d rows: %w", m, err)
		}
	}
	return nil
}
