package cuda

import (
	"fmt"

	"github.com/roseinfer/roseinfer/engine/model/arch"
)

// loweredRotary is a Program in the shape of the rotary block's step
// (qwen3.go): pre-RMSNorm, one q|k|v projection without biases, per-head
// q/k RMSNorm and rotary positions, grouped-query attention of head size
// 128, o_proj into the residual, RMSNorm, one gate|up projection, SwiGLU,
// down_proj into the residual; the final RMSNorm and a tied LM head.
// Qwen3's dense models have this shape at every size.
type loweredRotary struct {
	tokenEmbedding, normF          string
	ln1, qkv, qNorm, kNorm, o, ln2 string
	gateUp, down                   string
	eps                            float32
	theta                          float64
}

// rotaryHeadDim is the one head size the rotary kernels implement (every
// Qwen3 dense model's).
const rotaryHeadDim = 128

// isRotary reports whether p's embedding has no position table: the family
// puts positions in by rotation, and lowerRotary is its lowering.
func isRotary(p arch.Program) bool {
	return len(p.Embed) == 1 && p.Embed[0].Kind == arch.OpEmbed && p.Embed[0].Pos == ""
}

// lowerRotary matches p against the rotary block, op by op, naming the
// first op that differs.
func lowerRotary(p arch.Program, c arch.Config) (loweredRotary, error) {
	var lr loweredRotary
	const (
		res, norm, qkv, att, proj = arch.BufResidual, arch.BufNorm, arch.BufQKV, arch.BufAtt, arch.BufProj
		gateUp, hidden, logits    = arch.BufGateUp, arch.BufHidden, arch.BufLogits
	)
	type want struct {
		kind    arch.OpKind
		in, out arch.Buf
		dst     *string
	}
	check := func(part string, ops []arch.Op, ws []want) error {
		if len(ops) != len(ws) {
			return fmt.Errorf("cuda: the %s has %d ops; the rotary block's kernels run %d", part, len(ops), len(ws))
		}
		for i, o := range ops {
			w := ws[i]
			if o.Kind != w.kind || o.In != w.in || o.Out != w.out || o.Bias != "" || o.Act != arch.ActNone || o.Accumulate {
				return fmt.Errorf("cuda: %s op %d (%v %v→%v) is not implemented by the rotary block's kernels, which run %v %v→%v there",
					part, i, o.Kind, o.In, o.Out, w.kind, w.in, w.out)
			}
			if o.Kind == arch.OpRMSNorm || o.Kind == arch.OpAttention {
				if lr.eps != 0 && o.Eps != lr.eps {
					return fmt.Errorf("cuda: %s op %d: norm epsilon %g differs from the model's other norms (%g)", part, i, o.Eps, lr.eps)
				}
				lr.eps = o.Eps
			}
			if o.Kind == arch.OpAttention {
				if o.HeadDim != rotaryHeadDim || o.NumKVHeads < 1 || o.NumHeads%o.NumKVHeads != 0 || o.NumHeads/o.NumKVHeads > rotaryMaxGroup {
					return fmt.Errorf("cuda: attention with %d query heads over %d KV heads of %d is not implemented (head size %d; up to %d query heads a KV head)",
						o.NumHeads, o.NumKVHeads, o.HeadDim, rotaryHeadDim, rotaryMaxGroup)
				}
				if o.QNorm == "" || o.KNorm == "" || !(o.RopeTheta > 0) {
					return fmt.Errorf("cuda: attention without q/k norms or rotary positions is not implemented by the rotary block")
				}
				lr.qNorm, lr.kNorm, lr.theta = o.QNorm, o.KNorm, o.RopeTheta
			}
			if w.dst != nil {
				*w.dst = o.Weight
			}
		}
		return nil
	}
	var lmHead string
	if err := check("embedding", p.Embed, []want{{arch.OpEmbed, 0, res, &lr.tokenEmbedding}}); err != nil {
		return lr, err
	}
	if p.Embed[0].Pos != "" {
		return lr, fmt.Errorf("cuda: the rotary block has no position table (the embedding names %s)", p.Embed[0].Pos)
	}
	if err := check("layer", p.Layer, []want{
		{arch.OpRMSNorm, res, norm, &lr.ln1},
		{arch.OpLinear, norm, qkv, &lr.qkv},
		{arch.OpAttention, qkv, att, nil},
		{arch.OpLinear, att, proj, &lr.o},
		{arch.OpResidual, proj, res, nil},
		{arch.OpRMSNorm, res, norm, &lr.ln2},
		{arch.OpLinear, norm, gateUp, &lr.gateUp},
		{arch.OpSwiGLU, gateUp, hidden, nil},
		{arch.OpLinear, hidden, proj, &lr.down},
		{arch.OpResidual, proj, res, nil},
	}); err != nil {
		return lr, err
	}
	if err := check("head", p.Head, []want{{arch.OpRMSNorm, res, norm, &lr.normF}, {arch.OpLinear, norm, logits, &lmHead}}); err != nil {
		return lr, err
	}
	if lmHead != lr.tokenEmbedding {
		return lr, fmt.Errorf("cuda: an LM head (%s) other than the token embedding (%s) is not implemented (tied embeddings only)", lmHead, lr.tokenEmbedding)
	}
	if lr.eps != c.LayerNormEpsilon {
		return lr, fmt.Errorf("cuda: the norms' epsilon %g differs from the config's %g", lr.eps, c.LayerNormEpsilon)
	}
	if c.Channels%4 != 0 || c.Intermediate%2 != 0 {
		return lr, fmt.Errorf("cuda: hidden size %d (a multiple of 4) and intermediate size %d (even) are what the rotary kernels take", c.Channels, c.Intermediate)
	}
	return lr, nil
}

// rotaryMaxGroup is the most query heads a KV head q3_attn_rows takes: the
// columns of one MMA tile.
const rotaryMaxGroup = 8
