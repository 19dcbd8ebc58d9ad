package gpt2

import "github.com/roseinfer/roseinfer/engine/model/arch"

// program is GPT-2's forward in llm.c's order (gpt2_forward): token plus
// position embedding; per layer layernorm, qkv matmul, attention,
// projection, residual, layernorm, MLP up, GELU, MLP down, residual; then
// the final layernorm and the LM head, which is the token embedding.
func program(c arch.Config) arch.Program {
	C, I, V := c.Channels, c.Intermediate, c.VocabSize
	eps := c.LayerNormEpsilon
	return arch.Program{
		Embed: []arch.Op{
			{Kind: arch.OpEmbed, Out: arch.BufResidual, OutDim: C, Weight: WTE, Pos: WPE},
		},
		Layer: []arch.Op{
			{Kind: arch.OpLayerNorm, Out: arch.BufNorm, In: arch.BufResidual, InDim: C, OutDim: C, Weight: LN1W, Bias: LN1B, Eps: eps},
			{Kind: arch.OpLinear, Out: arch.BufQKV, In: arch.BufNorm, InDim: C, OutDim: 3 * C, Weight: QKVW, Bias: QKVB},
			{Kind: arch.OpAttention, Out: arch.BufAtt, In: arch.BufQKV, InDim: 3 * C, OutDim: C,
				NumHeads: c.NumHeads, NumKVHeads: c.NumKVHeads, HeadDim: c.HeadDim},
			{Kind: arch.OpLinear, Out: arch.BufProj, In: arch.BufAtt, InDim: C, OutDim: C, Weight: AttProjW, Bias: AttProjB},
			{Kind: arch.OpResidual, Out: arch.BufResidual, In: arch.BufProj, InDim: C, OutDim: C},
			{Kind: arch.OpLayerNorm, Out: arch.BufNorm, In: arch.BufResidual, InDim: C, OutDim: C, Weight: LN2W, Bias: LN2B, Eps: eps},
			{Kind: arch.OpLinear, Out: arch.BufHidden, In: arch.BufNorm, InDim: C, OutDim: I, Weight: FCW, Bias: FCB},
			{Kind: arch.OpGELU, Out: arch.BufHidden, In: arch.BufHidden, InDim: I, OutDim: I},
			{Kind: arch.OpLinear, Out: arch.BufProj, In: arch.BufHidden, InDim: I, OutDim: C, Weight: FCProjW, Bias: FCProjB},
			{Kind: arch.OpResidual, Out: arch.BufResidual, In: arch.BufProj, InDim: C, OutDim: C},
		},
		Head: []arch.Op{
			{Kind: arch.OpLayerNorm, Out: arch.BufNorm, In: arch.BufResidual, InDim: C, OutDim: C, Weight: LNFW, Bias: LNFB, Eps: eps},
			{Kind: arch.OpLinear, Out: arch.BufLogits, In: arch.BufNorm, InDim: C, OutDim: V, Weight: WTE},
		},
	}
}
