package cuda

import (
	"fmt"

	"github.com/roseinfer/roseinfer/engine/model/arch"
)

// The device runs a family's Program (engine/model/arch), never a family by
// name. Its kernels fuse ops (a LayerNorm into the projection after it, a
// GELU and a residual add into a projection's epilogue, the LayerNorm
// between attproj and fc into both projections), so it does not walk the
// ops one by one: lowerProgram matches the Program against the op sequences
// its fused kernels implement and returns the tensors each fused step
// reads. A Program with an op the kernels do not implement fails at New,
// naming that op. A Program whose embedding has no position table is the
// rotary block's (qwen3_lower.go), matched the same way against its own
// kernels; a new op kind means a new kernel and a new sequence.

// loweredProgram is a Program in the shape of the device's step: the
// tensors of each fused step, by canonical name.
type loweredProgram struct {
	tokenEmbedding, positionEmbedding string // (V, C), (maxT, C)
	layer                             loweredLayer
	lnfW, lnfB                        string // (C)
	eps                               float32
}

// loweredLayer is one pre-LayerNorm transformer block: ln_1 → qkv →
// multi-head attention → attproj (+= residual) → ln_2 → fc + GELU → fcproj
// (+= residual), every projection with a bias.
type loweredLayer struct {
	ln1W, ln1B, qkvW, qkvB, attProjW, attProjB string
	ln2W, ln2B, fcW, fcB, fcProjW, fcProjB     string
}

// fuseEpilogues folds an OpGELU over a linear's output into the linear (Act)
// and an OpResidual that adds a linear's output into the residual stream
// into the linear (Accumulate), the forms the device's GEMM epilogues run.
// A Program may list either form.
func fuseEpilogues(ops []arch.Op) []arch.Op {
	out := make([]arch.Op, 0, len(ops))
	for _, o := range ops {
		n := len(out)
		if n > 0 && out[n-1].Kind == arch.OpLinear && !out[n-1].Accumulate {
			prev := &out[n-1]
			switch {
			case o.Kind == arch.OpGELU && o.In == prev.Out && o.Out == prev.Out && prev.Act == arch.ActNone:
				prev.Act = arch.ActGELU
				continue
			case o.Kind == arch.OpResidual && o.In == prev.Out && o.Out == arch.BufResidual:
				prev.Out, prev.Accumulate = arch.BufResidual, true
				continue
			}
		}
		out = append(out, o)
	}
	return out
}

// opPattern is what one position of a fused sequence must be.
type opPattern struct {
	kind       arch.OpKind
	out, in    arch.Buf
	bias       bool
	act        arch.Act
	accumulate bool
	dst        [2]*string // the weight's and the bias's names go here
}

func (p opPattern) String() string {
	s := fmt.Sprintf("%v %v→%v", p.kind, p.in, p.out)
	if p.act == arch.ActGELU {
		s += " +GELU"
	}
	if p.accumulate {
		s += " +=residual"
	}
	return s
}

// matchOps checks ops against want, op by op, filling the patterns' names.
func matchOps(part string, ops []arch.Op, want []opPattern, eps *float32) error {
	if len(ops) != len(want) {
		return fmt.Errorf("cuda: the %s has %d ops after fusing epilogues; the device's kernels run %d: %v", part, len(ops), len(want), want)
	}
	for i, o := range ops {
		p := want[i]
		ok := o.Kind == p.kind && o.In == p.in && o.Out == p.out && o.Act == p.act && o.Accumulate == p.accumulate &&
			(o.Bias != "") == p.bias && (o.Kind != arch.OpEmbed || o.Pos != "")
		if ok && o.Kind == arch.OpLayerNorm {
			if *eps != 0 && o.Eps != *eps {
				return fmt.Errorf("cuda: %s op %d: LayerNorm epsilon %g differs from the model's other norms (%g)", part, i, o.Eps, *eps)
			}
			*eps = o.Eps
		}
		if !ok {
			return fmt.Errorf("cuda: %s op %d (%v %v→%v) is not implemented by the device's kernels, which run %v there", part, i, o.Kind, o.In, o.Out, p)
		}
		if p.dst[0] != nil {
			*p.dst[0] = o.Weight
		}
		if p.dst[1] != nil {
			*p.dst[1] = o.Bias
		}
		if p.kind == arch.OpEmbed {
			*p.dst[1] = o.Pos
		}
	}
	return nil
}

// lowerProgram maps p onto the device's fused step for a model of config c.
func lowerProgram(p arch.Program, c arch.Config) (loweredProgram, error) {
	var lp loweredProgram
	ly := &lp.layer
	const (
		res, norm, qkv, att = arch.BufResidual, arch.BufNorm, arch.BufQKV, arch.BufAtt
		hidden, logits      = arch.BufHidden, arch.BufLogits
	)
	var lmHead string
	parts := []struct {
		name string
		ops  []arch.Op
		want []opPattern
	}{
		{"embedding", p.Embed, []opPattern{
			{kind: arch.OpEmbed, out: res, dst: [2]*string{&lp.tokenEmbedding, &lp.positionEmbedding}},
		}},
		{"layer", p.Layer, []opPattern{
			{kind: arch.OpLayerNorm, out: norm, in: res, bias: true, dst: [2]*string{&ly.ln1W, &ly.ln1B}},
			{kind: arch.OpLinear, out: qkv, in: norm, bias: true, dst: [2]*string{&ly.qkvW, &ly.qkvB}},
			{kind: arch.OpAttention, out: att, in: qkv},
			{kind: arch.OpLinear, out: res, in: att, bias: true, accumulate: true, dst: [2]*string{&ly.attProjW, &ly.attProjB}},
			{kind: arch.OpLayerNorm, out: norm, in: res, bias: true, dst: [2]*string{&ly.ln2W, &ly.ln2B}},
			{kind: arch.OpLinear, out: hidden, in: norm, bias: true, act: arch.ActGELU, dst: [2]*string{&ly.fcW, &ly.fcB}},
			{kind: arch.OpLinear, out: res, in: hidden, bias: true, accumulate: true, dst: [2]*string{&ly.fcProjW, &ly.fcProjB}},
		}},
		{"head", p.Head, []opPattern{
			{kind: arch.OpLayerNorm, out: norm, in: res, bias: true, dst: [2]*string{&lp.lnfW, &lp.lnfB}},
			{kind: arch.OpLinear, out: logits, in: norm, dst: [2]*string{&lmHead}},
		}},
	}
	for _, part := range parts {
		if err := matchOps(part.name, fuseEpilogues(part.ops), part.want, &lp.eps); err != nil {
			return loweredProgram{}, err
		}
	}
	for _, o := range p.Layer {
		if o.Kind == arch.OpAttention && (o.NumKVHeads != o.NumHeads || o.NumHeads*o.HeadDim != c.Channels) {
			return loweredProgram{}, fmt.Errorf("cuda: attention with %d query heads, %d KV heads of %d is not implemented (multi-head attention with NH·HS = C only)",
				o.NumHeads, o.NumKVHeads, o.HeadDim)
		}
	}
	if lmHead != lp.tokenEmbedding {
		return loweredProgram{}, fmt.Errorf("cuda: an LM head (%s) other than the token embedding (%s) is not implemented (tied embeddings only)", lmHead, lp.tokenEmbedding)
	}
	if lp.eps != c.LayerNormEpsilon {
		return loweredProgram{}, fmt.Errorf("cuda: the norms' epsilon %g differs from the config's %g", lp.eps, c.LayerNormEpsilon)
	}
	return lp, nil
}
