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
		if o.Pos == "" {
			perr = fmt.Errorf("an embedding without a position table is not implemented")
		}
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
	case arch.OpAttention:
		if !inLayer || o.NumKVHeads != o.NumHeads || o.NumHeads*o.HeadDim != o.OutDim || o.InDim != 3*o.OutDim ||
			o.OutDim != c.KVChannels() {
			err = fmt.Errorf("only multi-head attention with NH·HS = C and a (3C) qkv row is implemented: %+v", o)
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
