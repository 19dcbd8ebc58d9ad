package cpu

import (
	"fmt"

	"github.com/roseinfer/roseinfer/engine/model"
	"github.com/roseinfer/roseinfer/engine/model/arch"
)

// op is one op of the model's Program with its tensors resolved, once at
// New, to views of the weights, so the forward looks nothing up.
type op struct {
	arch.Op
	weight, bias, pos []float32 // whole tensors: per-layer ones stacked (L, ...)
	weightSize        int       // per layer; 0 when the tensor is not per-layer
	biasSize          int
	qNorm, kNorm      []float32 // OpAttention's per-head norm weights, stacked (L, HS); nil = none
	qkNormSize        int       // per layer
}

// layerQKNorm is layer l's q and k norm weights (HS each).
func (o *op) layerQKNorm(l int) (qw, kw []float32) {
	if o.qkNormSize == 0 {
		return o.qNorm, o.kNorm
	}
	n := o.qkNormSize
	return o.qNorm[l*n : (l+1)*n], o.kNorm[l*n : (l+1)*n]
}

// layerWeights are layer l's slices of the op's weight and bias (the whole
// tensors when they are not per-layer; bias nil when there is none).
func (o *op) layerWeights(l int) (w, b []float32) {
	w, b = o.weight, o.bias
	if o.weightSize > 0 {
		w = w[l*o.weightSize : (l+1)*o.weightSize]
	}
	if o.biasSize > 0 {
		b = b[l*o.biasSize : (l+1)*o.biasSize]
	}
	return w, b
}

// program is the Program as resolved ops.
type program struct {
	embed, layer, head []op
}

// resolveProgram resolves every op's tensors in w and checks each op's
// sizes against them and against what this device implements, so that a
// Program the device cannot run fails here and never in the forward.
func resolveProgram(p arch.Program, w *model.Weights) (program, error) {
	var rp program
	for _, part := range []struct {
		name string
		ops  []arch.Op
		dst  *[]op
	}{{"embed", p.Embed, &rp.embed}, {"layer", p.Layer, &rp.layer}, {"head", p.Head, &rp.head}} {
		for i, o := range part.ops {
			r, err := resolveOp(o, w, part.name == "layer")
			if err != nil {
				return program{}, fmt.Errorf("cpu: %s op %d (%v): %w", part.name, i, o.Kind, err)
			}
			if o.Kind == arch.OpEmbed && part.name != "embed" || o.Kind == arch.OpAttention && part.name != "layer" {
				return program{}, fmt.Errorf("cpu: %s op %d: %v does not belong in the %s ops", part.name, i, o.Kind, part.name)
			}
			*part.dst = append(*part.dst, r)
		}
	}
	if n := len(rp.head); n == 0 || rp.head[n-1].Kind != arch.OpLinear || rp.head[n-1].Out != arch.BufLogits ||
		rp.head[n-1].OutDim != w.Config.VocabSize {
		return program{}, fmt.Errorf("cpu: the head must end with a linear op writing (M, %d) logits", w.Config.VocabSize)
	}
	return rp, nil
}

// resolveOp looks up one op's tensors and checks its sizes.
func resolveOp(o arch.Op, w *model.Weights, inLayer bool) (op, error) {
	c := w.Config
	r := op{Op: o}
	tensor := func(name string, size int) ([]float32, int, error) {
		if name == "" {
			return nil, 0, nil
		}
		t, err := w.Tensor(name)
		if err != nil {
			return nil, 0, err
		}
		if !t.PerLayer {
			if len(t.Data) != size {
				return nil, 0, fmt.Errorf("tensor %q has %d values, the op needs %d", name, len(t.Data), size)
			}
			return t.Data, 0, nil
		}
		if !inLayer || len(t.Data) != c.NumLayers*size {
			return nil, 0, fmt.Errorf("per-layer tensor %q (%d values) does not fit %d per layer here", name, len(t.Data), size)
		}
		return t.Data, size, nil
	}
	var err, berr, perr error
	switch o.Kind {
	case arch.OpEmbed:
		r.weight, r.weightSize, err = tensor(o.Weight, c.VocabSize*o.OutDim)
		r.pos, _, perr = tensor(o.Pos, c.MaxSeqLen*o.OutDim)
	case arch.OpLayerNorm:
		r.weight, r.weightSize, err = tensor(o.Weight, o.InDim)
		r.bias, r.biasSize, berr = tensor(o.Bias, o.InDim)
		if o.Bias == "" || o.InDim != o.OutDim {
			berr = fmt.Errorf("a layernorm needs a bias and keeps the width")
		}
	case arch.OpLinear:
		r.weight, r.weightSize, err = tensor(o.Weight, o.OutDim*o.InDim)
		r.bias, r.biasSize, berr = tensor(o.Bias, o.OutDim)
		if o.Act != arch.ActNone && o.Act != arch.ActGELU {
			perr = fmt.Errorf("activation %d is not implemented", o.Act)
		}
	case arch.OpRMSNorm:
		r.weight, r.weightSize, err = tensor(o.Weight, o.InDim)
		if o.Bias != "" || o.InDim != o.OutDim || !(o.Eps > 0) {
			berr = fmt.Errorf("an rmsnorm has no bias, keeps the width and needs eps > 0")
		}
	case arch.OpSwiGLU:
		if o.InDim != 2*o.OutDim {
			err = fmt.Errorf("swiglu reads gate and up side by side: in width %d is not 2 x %d", o.InDim, o.OutDim)
		}
	case arch.OpAttention:
		NH, NKV, HS := o.NumHeads, o.NumKVHeads, o.HeadDim
		if !inLayer || NH < 1 || NKV < 1 || HS < 1 || NH%NKV != 0 || o.OutDim != NH*HS || o.InDim != (NH+2*NKV)*HS ||
			NKV*HS != c.KVChannels() {
			err = fmt.Errorf("attention needs NKV | NH, a (NH+2·NKV)·HS qkv row, an NH·HS output and NKV·HS = the cache's %d channels: %+v",
				c.KVChannels(), o)
			break
		}
		if (o.QNorm == "") != (o.KNorm == "") || o.QNorm != "" && !(o.Eps > 0) {
			berr = fmt.Errorf("q and k norms come together, with eps > 0")
			break
		}
		r.qNorm, r.qkNormSize, berr = tensor(o.QNorm, HS)
		r.kNorm, _, perr = tensor(o.KNorm, HS)
		if o.RopeTheta < 0 || o.RopeTheta > 0 && HS%2 != 0 {
			perr = fmt.Errorf("rotary positions need theta > 0 and an even head size, got %g and %d", o.RopeTheta, HS)
		}
	case arch.OpGELU, arch.OpResidual:
		if o.InDim != o.OutDim {
			err = fmt.Errorf("in and out widths differ: %d and %d", o.InDim, o.OutDim)
		}
	default:
		err = fmt.Errorf("op kind %v is not implemented", o.Kind)
	}
	for _, e := range []error{err, berr, perr} {
		if e != nil {
			return op{}, e
		}
	}
	return r, nil
}

// bufferWidths gives each buffer the widest row any of ops reads or writes
// in it, and the widest accumulating linear (which computes into scratch).
func bufferWidths(ops []op, widths *[arch.NumBufs]int, scratchWidth *int) {
	for _, o := range ops {
		widths[o.Out] = max(widths[o.Out], o.OutDim)
		if o.Kind != arch.OpEmbed {
			widths[o.In] = max(widths[o.In], o.InDim)
		}
		if o.Kind == arch.OpLinear && o.Accumulate {
			*scratchWidth = max(*scratchWidth, o.OutDim)
		}
	}
}
