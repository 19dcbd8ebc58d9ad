package model

import "fmt"

// Weights are all parameters of a GPT-2 in fp32, in one allocation (Data);
// each named field is a view into it, as in llm.c's ParameterTensors. Layer
// tensors are stacked along a leading L axis. The matrices keep Hugging Face's
// Conv1D layout [in, out] (so y = x·W + b), exactly as model.safetensors
// stores them; a device may re-lay them out for its own kernels.
type Weights struct {
	Config Config

	// Data holds every parameter, in the order of the fields below.
	Data []float32

	WTE      []float32 // (V, C) token embedding; also the LM head (tied)
	WPE      []float32 // (maxT, C) position embedding
	LN1W     []float32 // (L, C) ln_1 weight
	LN1B     []float32 // (L, C) ln_1 bias
	QKVW     []float32 // (L, C, 3C) attn.c_attn weight, columns q | k | v
	QKVB     []float32 // (L, 3C) attn.c_attn bias
	AttProjW []float32 // (L, C, C) attn.c_proj weight
	AttProjB []float32 // (L, C) attn.c_proj bias
	LN2W     []float32 // (L, C) ln_2 weight
	LN2B     []float32 // (L, C) ln_2 bias
	FCW      []float32 // (L, C, 4C) mlp.c_fc weight
	FCB      []float32 // (L, 4C) mlp.c_fc bias
	FCProjW  []float32 // (L, 4C, C) mlp.c_proj weight
	FCProjB  []float32 // (L, C) mlp.c_proj bias
	LNFW     []float32 // (C) ln_f weight
	LNFB     []float32 // (C) ln_f bias
}

// Tensor is one named parameter in Hugging Face naming: a view into
// Weights.Data with its shape.
type Tensor struct {
	Name  string // e.g. "h.3.attn.c_attn.weight" (no "transformer." prefix)
	Shape []int
	Data  []float32
}

// NumParameters is the number of fp32 values in Weights.Data.
func (c Config) NumParameters() int { return c.numParameters() }

func (c Config) numParameters() int {
	n := 0
	for _, s := range c.fieldSizes() {
		n += s
	}
	return n
}

// fieldSizes gives the element count of each Weights field, in Data order.
func (c Config) fieldSizes() [16]int {
	L, C, V, maxT := c.NumLayers, c.Channels, c.VocabSize, c.MaxSeqLen
	return [16]int{
		V * C, maxT * C, // WTE, WPE
		L * C, L * C, // LN1W, LN1B
		L * C * 3 * C, L * 3 * C, // QKVW, QKVB
		L * C * C, L * C, // AttProjW, AttProjB
		L * C, L * C, // LN2W, LN2B
		L * C * 4 * C, L * 4 * C, // FCW, FCB
		L * 4 * C * C, L * C, // FCProjW, FCProjB
		C, C, // LNFW, LNFB
	}
}

// NewWeights allocates zeroed weights for c and points the fields into one
// buffer.
func NewWeights(c Config) (*Weights, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	w := &Weights{Config: c, Data: make([]float32, c.numParameters())}
	fields := [16]*[]float32{
		&w.WTE, &w.WPE, &w.LN1W, &w.LN1B, &w.QKVW, &w.QKVB, &w.AttProjW, &w.AttProjB,
		&w.LN2W, &w.LN2B, &w.FCW, &w.FCB, &w.FCProjW, &w.FCProjB, &w.LNFW, &w.LNFB,
	}
	off := 0
	for i, size := range c.fieldSizes() {
		*fields[i] = w.Data[off : off+size : off+size]
		off += size
	}
	return w, nil
}

// Tensors lists every parameter under its Hugging Face name (GPT2Model's
// state_dict keys), with views into w.Data. It is the single table the
// safetensors reader and writer work from.
func (w *Weights) Tensors() []Tensor {
	c := w.Config
	L, C, V, maxT := c.NumLayers, c.Channels, c.VocabSize, c.MaxSeqLen
	ts := make([]Tensor, 0, 4+12*L)
	ts = append(ts,
		Tensor{"wte.weight", []int{V, C}, w.WTE},
		Tensor{"wpe.weight", []int{maxT, C}, w.WPE},
	)
	// layer returns layer l's slice of a stacked (L, ...) tensor.
	layer := func(t []float32, l int) []float32 {
		n := len(t) / L
		return t[l*n : (l+1)*n : (l+1)*n]
	}
	for l := 0; l < L; l++ {
		p := fmt.Sprintf("h.%d.", l)
		ts = append(ts,
			Tensor{p + "ln_1.weight", []int{C}, layer(w.LN1W, l)},
			Tensor{p + "ln_1.bias", []int{C}, layer(w.LN1B, l)},
			Tensor{p + "attn.c_attn.weight", []int{C, 3 * C}, layer(w.QKVW, l)},
			Tensor{p + "attn.c_attn.bias", []int{3 * C}, layer(w.QKVB, l)},
			Tensor{p + "attn.c_proj.weight", []int{C, C}, layer(w.AttProjW, l)},
			Tensor{p + "attn.c_proj.bias", []int{C}, layer(w.AttProjB, l)},
			Tensor{p + "ln_2.weight", []int{C}, layer(w.LN2W, l)},
			Tensor{p + "ln_2.bias", []int{C}, layer(w.LN2B, l)},
			Tensor{p + "mlp.c_fc.weight", []int{C, 4 * C}, layer(w.FCW, l)},
			Tensor{p + "mlp.c_fc.bias", []int{4 * C}, layer(w.FCB, l)},
			Tensor{p + "mlp.c_proj.weight", []int{4 * C, C}, layer(w.FCProjW, l)},
			Tensor{p + "mlp.c_proj.bias", []int{C}, layer(w.FCProjB, l)},
		)
	}
	ts = append(ts,
		Tensor{"ln_f.weight", []int{C}, w.LNFW},
		Tensor{"ln_f.bias", []int{C}, w.LNFB},
	)
	return ts
}
