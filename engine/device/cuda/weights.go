package cuda

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/roseinfer/roseinfer/engine/model"
)

// gpuWeights are the model's parameters on the GPU, carved out of one
// allocation. GEMM weights are fp16 and re-laid out as (out, in) rows so every
// projection is the same transposed-A cuBLASLt call (llm.c's layout); the
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

func (h *hostImage) f16(src []float32) devPtr {
	h.align()
	off := len(h.buf)
	for _, v := range src {
		b := f32ToF16(v)
		h.buf = append(h.buf, byte(b), byte(b>>8))
	}
	return devPtr(off)
}

// f16T stores the (rows, cols) row-major matrix src transposed, as (cols, rows).
func (h *hostImage) f16T(src []float32, rows, cols int) devPtr {
	t := make([]float32, len(src))
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			t[c*rows+r] = src[r*cols+c]
		}
	}
	return h.f16(t)
}

// uploadWeights converts w to the GPU layout and copies it in one transfer.
func uploadWeights(g *gpu, w *model.Weights) (gpuWeights, error) {
	c := w.Config
	L, C := c.NumLayers, c.Channels
	h := &hostImage{buf: make([]byte, 0, 2*c.NumParameters()+64<<10)}
	var gw gpuWeights
	gw.wte = h.f16(w.WTE)
	// Zero rows up to the padded vocabulary: the LM head then computes
	// vocabPadded columns (a multiple of 128, which cuBLASLt's Hopper kernels
	// need; V = 50257 columns got a Turing-era kernel at 1/4 of the speed),
	// and the sampler never reads the extra ones.
	h.buf = append(h.buf, make([]byte, 2*(paddedVocab(c.VocabSize)-c.VocabSize)*C)...)
	gw.wpe = h.f16(w.WPE)
	gw.lnfW = h.f32(w.LNFW)
	gw.lnfB = h.f32(w.LNFB)
	slice := func(t []float32, l int) []float32 { n := len(t) / L; return t[l*n : (l+1)*n] }
	gw.layers = make([]gpuLayer, L)
	for l := 0; l < L; l++ {
		ly := &gw.layers[l]
		ly.ln1W, ly.ln1B = h.f32(slice(w.LN1W, l)), h.f32(slice(w.LN1B, l))
		ly.qkvW = h.f16T(slice(w.QKVW, l), C, 3*C) // HF Conv1D (in, out) -> (out, in)
		ly.qkvB = h.f16(slice(w.QKVB, l))
		ly.attProjW = h.f16T(slice(w.AttProjW, l), C, C)
		ly.attProjB = h.f32(slice(w.AttProjB, l))
		ly.attProjB16 = h.f16(slice(w.AttProjB, l))
		ly.ln2W, ly.ln2B = h.f32(slice(w.LN2W, l)), h.f32(slice(w.LN2B, l))
		ly.fcW = h.f16T(slice(w.FCW, l), C, 4*C)
		ly.fcB = h.f16(slice(w.FCB, l))
		s, b := lnFoldColumns(slice(w.LN2W, l), slice(w.LN2B, l), slice(w.FCW, l), slice(w.FCB, l))
		ly.fcLNs, ly.fcLNb = h.f32(s), h.f32(b)
		ly.fcProjW = h.f16T(slice(w.FCProjW, l), 4*C, C)
		ly.fcProjB = h.f32(slice(w.FCProjB, l))
		ly.fcProjB16 = h.f16(slice(w.FCProjB, l))
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

// lnFoldColumns returns, for the projection w (HF Conv1D: (in, out)
// row-major, used in fp16) with bias b after a LayerNorm (gamma, beta), each
// output column's s = sum_k gamma_k W_kc and b' = sum_k beta_k W_kc + b_c
// (b in fp16, as the unfolded path adds it), in float64 rounded to fp32: the
// LayerNorm fold's column terms (gemm_wg.cu).
func lnFoldColumns(gamma, beta, w, b []float32) (s, bp []float32) {
	in, out := len(gamma), len(b)
	s, bp = make([]float32, out), make([]float32, out)
	sum, bsum := make([]float64, out), make([]float64, out)
	for k := 0; k < in; k++ {
		g, be := float64(gamma[k]), float64(beta[k])
		row := w[k*out : (k+1)*out]
		for c, v := range row {
			wv := float64(f16ToF32(f32ToF16(v)))
			sum[c] += g * wv
			bsum[c] += be * wv
		}
	}
	for c := range s {
		s[c] = float32(sum[c])
		bp[c] = float32(bsum[c] + float64(f16ToF32(f32ToF16(b[c]))))
	}
	return s, bp
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
