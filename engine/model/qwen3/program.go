package qwen3

import "github.com/roseinfer/roseinfer/engine/model/arch"

// program is Qwen3's forward (transformers' Qwen3Model.forward) as ops:
// token embedding (no position table: positions enter by rotation); per
// layer RMSNorm, the q|k|v matmul, attention (per-head q/k RMSNorm, rotary
// positions, the KV write, grouped-query attention), o_proj, residual,
// RMSNorm, the gate|up matmul, SwiGLU, down_proj, residual; then the final
// RMSNorm and the LM head, which is the token embedding (tied).
func program(c arch.Config) arch.Program {
	C, I, V := c.Channels, c.Intermediate, c.VocabSize
	NH, NKV, HS := c.NumHeads, c.NumKVHeads, c.HeadDim
	eps := c.LayerNormEpsilon
	return arch.Program{
		Embed: []arch.Op{
			{Kind: arch.OpEmbed, Out: arch.BufResidual, OutDim: C, Weight: Embed},
		},
		Layer: []arch.Op{
			{Kind: arch.OpRMSNorm, Out: arch.BufNorm, In: arch.BufResidual, InDim: C, OutDim: C, Weight: LN1W, Eps: eps},
			{Kind: arch.OpLinear, Out: arch.BufQKV, In: arch.BufNorm, InDim: C, OutDim: (NH + 2*NKV) * HS, Weight: QKVW},
			{Kind: arch.OpAttention, Out: arch.BufAtt, In: arch.BufQKV, InDim: (NH + 2*NKV) * HS, OutDim: NH * HS,
				NumHeads: NH, NumKVHeads: NKV, HeadDim: HS, QNorm: QNormW, KNorm: KNormW, Eps: eps, RopeTheta: c.RopeTheta},
			{Kind: arch.OpLinear, Out: arch.BufProj, In: arch.BufAtt, InDim: NH * HS, OutDim: C, Weight: AttProjW},
			{Kind: arch.OpResidual, Out: arch.BufResidual, In: arch.BufProj, InDim: C, OutDim: C},
			{Kind: arch.OpRMSNorm, Out: arch.BufNorm, In: arch.BufResidual, InDim: C, OutDim: C, Weight: LN2W, Eps: eps},
			{Kind: arch.OpLinear, Out: arch.BufGateUp, In: arch.BufNorm, InDim: C, OutDim: 2 * I, Weight: GateUpW},
			{Kind: arch.OpSwiGLU, Out: arch.BufHidden, In: arch.BufGateUp, InDim: 2 * I, OutDim: I},
			{Kind: arch.OpLinear, Out: arch.BufProj, In: arch.BufHidden, InDim: I, OutDim: C, Weight: DownW},
			{Kind: arch.OpResidual, Out: arch.BufResidual, In: arch.BufProj, InDim: C, OutDim: C},
		},
		Head: []arch.Op{
			{Kind: arch.OpRMSNorm, Out: arch.BufNorm, In: arch.BufResidual, InDim: C, OutDim: C, Weight: NormW, Eps: eps},
			{Kind: arch.OpLinear, Out: arch.BufLogits, In: arch.BufNorm, InDim: C, OutDim: V, Weight: Embed},
		},
	}
}
