package cuda

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/roseinfer/roseinfer/engine/model"
	"github.com/roseinfer/roseinfer/engine/model/arch"
)

// gpuWeights are the model's parameters on the GPU, carved out of one
// allocation. GEMM weights are fp16 (out, in) rows, model.Weights' layout,
// so every projection is the same transposed-A cuBLASLt call (llm.c's); the
// embeddings are fp16; LayerNorm parameters stay fp32. Biases take the type
// of the GEMM output they are added to: fp16 where the GEMM writes fp16
// (qkv, fc), fp32 where it accumulates into the fp32 residual stream.
type gpuWeights struct {
	base devPtr

	wte, wpe   devPtr // (Vp, C) with rows V.. zero, (maxT, C) fp16
	lnfW, lnfB devPtr // (C) fp32
	layers     []gpuLayer
}

type gpuLayer struct {
	ln1W, ln1B devPtr // (C) fp32
	qkvW       devPtr // (3C, C) fp16
	qkvB       devPtr // (3C) fp16
	attProjW   devPtr // (C, C) fp16
	attProjB   devPtr // (C) fp32
	ln2W, ln2B devPtr // (C) fp32
	fcW        devPtr // (4C, C) fp16
	fcB        devPtr // (4C) fp16
	fcProjW    devPtr // (C, 4C) fp16
	fcProjB    devPtr // (C) fp32
	fcLNs      devPtr // (4C) fp32: ln2W W_fc^T (the LayerNorm fold, gemm_wg.cu)
	fcLNb      devPtr // (4C) fp32: ln2B W_fc^T + fcB
	attProjB16 devPtr // (C) fp16, for the fallback path that cannot accumulate in fp32
	fcProjB16  devPtr // (C) fp16
}

// hostImage builds the byte image of all parameters (with 256-byte aligned
// tensors, which cuBLASLt's default algorithms expect) and records each
// tensor's offset; upload adds the base address.
type hostImage struct {
	buf []byte
}

func (h *hostImage) align() {
	for len(h.buf)%256 != 0 {
		h.buf = append(h.buf, 0)
	}
}

func (h *hostImage) f32(src []float32) devPtr {
	h.align()
	off := len(h.buf)
	for _, v := range src {
		b := math.Float32bits(v)
		h.buf = append(h.buf, byte(b), byte(b>>8), byte(b>>16), byte(b>>24))
	}
	return devPtr(off)
}

func (h *hostImage) f16(src []float32) devPtr { return h.half(src, f32ToF16) }

// half appends src as 16-bit values, each rounded by conv.
func (h *hostImage) half(src []float32, conv func(float32) uint16) devPtr {
	h.align()
	off := len(h.buf)
	for _, v := range src {
		b := conv(v)
		h.buf = append(h.buf, byte(b), byte(b>>8))
	}
	return devPtr(off)
}

// uploadWeights converts w to the GPU layout and copies it in one transfer.
// The family's Program, lowered onto the device's fused step, names the
// tensors each step reads; the matrices are already (out, in) in
// model.Weights' canonical layout.
func uploadWeights(g *gpu, w *model.Weights) (gpuWeights, error) {
	c := w.Config
	f, err := arch.Lookup(c.Family)
	if err != nil {
		return gpuWeights{}, fmt.Errorf("cuda: %w", err)
	}
	lp, err := lowerProgram(f.Program(c), c)
	if err != nil {
		return gpuWeights{}, fmt.Errorf("cuda: the %s family: %w", f.Title, err)
	}
	names := lp.layer
	t := make(map[string][]float32)
	for _, name := range []string{lp.tokenEmbedding, lp.positionEmbedding, lp.lnfW, lp.lnfB, names.ln1W, names.ln1B, names.qkvW,
		names.qkvB, names.attProjW, names.attProjB, names.ln2W, names.ln2B, names.fcW, names.fcB, names.fcProjW, names.fcProjB} {
		x, err := w.Tensor(name)
		if err != nil {
			return gpuWeights{}, fmt.Errorf("cuda: %w", err)
		}
		t[name] = x.Data
	}
	L, C := c.NumLayers, c.Channels
	h := &hostImage{buf: make([]byte, 0, 2*c.NumParameters()+64<<10)}
	var gw gpuWeights
	gw.wte = h.f16(t[lp.tokenEmbedding])
	// Zero rows up to the padded vocabulary: the LM head then computes
	// vocabPadded columns (a multiple of 128, which cuBLASLt's Hopper kernels
	// need; V = 50257 columns got a Turing-era kernel at 1/4 of the speed),
	// and the sampler never reads the extra ones.
	h.buf = append(h.buf, make([]byte, 2*(paddedVocab(c.VocabSize)-c.VocabSize)*C)...)
	gw.wpe = h.f16(t[lp.positionEmbedding])
	gw.lnfW = h.f32(t[lp.lnfW])
	gw.lnfB = h.f32(t[lp.lnfB])
	slice := func(name string, l int) []float32 { x := t[name]; n := len(x) / L; return x[l*n : (l+1)*n] }
	gw.layers = make([]gpuLayer, L)
	for l := 0; l < L; l++ {
		gl := &gw.layers[l]
		gl.ln1W, gl.ln1B = h.f32(slice(names.ln1W, l)), h.f32(slice(names.ln1B, l))
		gl.qkvW = h.f16(slice(names.qkvW, l))
		gl.qkvB = h.f16(slice(names.qkvB, l))
		gl.attProjW = h.f16(slice(names.attProjW, l))
		gl.attProjB = h.f32(slice(names.attProjB, l))
		gl.attProjB16 = h.f16(slice(names.attProjB, l))
		gl.ln2W, gl.ln2B = h.f32(slice(names.ln2W, l)), h.f32(slice(names.ln2B, l))
		gl.fcW = h.f16(slice(names.fcW, l))
		gl.fcB = h.f16(slice(names.fcB, l))
		s, b := lnFoldRows(slice(names.ln2W, l), slice(names.ln2B, l), slice(names.fcW, l), slice(names.fcB, l))
		gl.fcLNs, gl.fcLNb = h.f32(s), h.f32(b)
		gl.fcProjW = h.f16(slice(names.fcProjW, l))
		gl.fcProjB = h.f32(slice(names.fcProjB, l))
		gl.fcProjB16 = h.f16(slice(names.fcProjB, l))
	}
	h.align()
	base, err := g.drv.memAlloc(len(h.buf))
	if err != nil {
		return gw, fmt.Errorf("cuda: weights (%d MB): %w", len(h.buf)>>20, err)
	}
	if err := g.drv.htod(base, unsafe.Pointer(&h.buf[0]), len(h.buf)); err != nil {
		g.drv.memFree(base)
		return gw, err
	}
	gw.base = base
	rebase := func(p *devPtr) { *p += base }
	for _, p := range []*devPtr{&gw.wte, &gw.wpe, &gw.lnfW, &gw.lnfB} {
		rebase(p)
	}
	for l := range gw.layers {
		ly := &gw.layers[l]
		for _, p := range []*devPtr{&ly.ln1W, &ly.ln1B, &ly.qkvW, &ly.qkvB, &ly.attProjW, &ly.attProjB, &ly.attProjB16,
			&ly.ln2W, &ly.ln2B, &ly.fcW, &ly.fcB, &ly.fcProjW, &ly.fcProjB, &ly.fcProjB16, &ly.fcLNs, &ly.fcLNb} {
			rebase(p)
		}
	}
	return gw, nil
}

// lnFoldRows returns, for the projection w ((out, in) rows, used in fp16)
// with bias b after a LayerNorm (gamma, beta), each output row's
// s = sum_k gamma_k W_ck and b' = sum_k beta_k W_ck + b_c (b in fp16, as the
// unfolded path adds it), in float64 rounded to fp32: the LayerNorm fold's
// column terms (gemm_wg.cu).
func lnFoldRows(gamma, beta, w, b []float32) (s, bp []float32) {
	in, out := len(gamma), len(b)
	s, bp = make([]float32, out), make([]float32, out)
	for c := 0; c < out; c++ {
		sum, bsum := 0.0, 0.0
		for k, v := range w[c*in : (c+1)*in] {
			wv := float64(f16ToF32(f32ToF16(v)))
			sum += float64(gamma[k]) * wv
			bsum += float64(beta[k]) * wv
		}
		s[c] = float32(sum)
		bp[c] = float32(bsum + float64(f16ToF32(f32ToF16(b[c]))))
	}
	return s, bp
}

// lnFoldColumns is lnFoldRows for w in HF Conv1D's (in, out) layout.
func lnFoldColumns(gamma, beta, w, b []float32) (s, bp []float32) {
	in, out := len(gamma), len(b)
	rows := make([]float32, len(w))
	for k := 0; k < in; k++ {
		for c := 0; c < out; c++ {
			rows[c*in+k] = w[k*out+c]
		}
	}
	return lnFoldRows(gamma, beta, rows, b)
}

// f32ToF16 rounds to the nearest fp16, ties to even, with overflow to inf and
// gradual underflow to subnormals.
func f32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	switch {
	case exp == 0xff: // inf or NaN
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp-127 > 15:
		return sign | 0x7c00
	case exp-127 >= -14: // normal
		e := uint32(exp - 127 + 15)
		m := mant >> 13
		rest := mant & 0x1fff
		v := e<<10 | m
		if rest > 0x1000 || (rest == 0x1000 && m&1 == 1) {
			v++ // may carry into the exponent, which is the right rounding
		}
		return sign | uint16(v)
	case exp-127 >= -25: // subnormal
		m := mant | 0x800000
		shift := uint32(-(exp - 127) - 14 + 13)
		v := m >> shift
		rest := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rest > half || (rest == half && v&1 == 1) {
			v++
		}
		return sign | uint16(v)
	}
	return sign
}

// f16ToF32 widens an fp16 value exactly.
func f16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := int(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		f := float32(mant) * float32(math.Pow(2, -24))
		if sign != 0 {
			return -f
		}
		return f
	}
	return math.Float32frombits(sign | uint32(exp-15+127)<<23 | mant<<13)
}

// paddedVocab is the logits row length: V rounded up to a multiple of 128.
func paddedVocab(v int) int { return (v + 127) &^ 127 }
