package qwen3

import (
	"strings"

	"github.com/roseinfer/roseinfer/engine/model/arch"
)

// The canonical tensor names. Shapes are the canonical (out, in) layout,
// with a leading L for per-layer tensors; every matrix is stored as
// nn.Linear stores it, so none is transposed.
const (
	Embed    = "embed"    // (V, C) model.embed_tokens; also the LM head (tied)
	LN1W     = "ln1w"     // (L, C) input_layernorm
	QKVW     = "qkvw"     // (L, (NH+2·NKV)·HS, C) q_proj | k_proj | v_proj rows
	QNormW   = "qnormw"   // (L, HS) self_attn.q_norm, per head
	KNormW   = "knormw"   // (L, HS) self_attn.k_norm, per head
	AttProjW = "attprojw" // (L, C, NH·HS) self_attn.o_proj
	LN2W     = "ln2w"     // (L, C) post_attention_layernorm
	GateUpW  = "gateupw"  // (L, 2I, C) mlp.gate_proj | mlp.up_proj rows
	DownW    = "downw"    // (L, C, I) mlp.down_proj
	NormW    = "normw"    // (C) model.norm
)

// tensors lists Qwen3's parameters under Qwen3ForCausalLM's state_dict
// names; lm_head is tied to embed_tokens and not stored (save_pretrained
// drops it).
func tensors(c arch.Config) []arch.TensorSpec {
	C, I, V := c.Channels, c.Intermediate, c.VocabSize
	NH, NKV, HS := c.NumHeads, c.NumKVHeads, c.HeadDim
	layer := func(name string, file string, shape ...int) arch.TensorSpec {
		return arch.TensorSpec{Name: name, Shape: shape, PerLayer: true, File: "model.layers.%d." + file}
	}
	parts := func(name string, cols int, parts ...arch.TensorPart) arch.TensorSpec {
		rows := 0
		for i := range parts {
			parts[i].File = "model.layers.%d." + parts[i].File
			rows += parts[i].Rows
		}
		return arch.TensorSpec{Name: name, Shape: []int{rows, cols}, PerLayer: true, Parts: parts}
	}
	return []arch.TensorSpec{
		{Name: Embed, Shape: []int{V, C}, File: "model.embed_tokens.weight"},
		layer(LN1W, "input_layernorm.weight", C),
		parts(QKVW, C, arch.TensorPart{File: "self_attn.q_proj.weight", Rows: NH * HS},
			arch.TensorPart{File: "self_attn.k_proj.weight", Rows: NKV * HS},
			arch.TensorPart{File: "self_attn.v_proj.weight", Rows: NKV * HS}),
		layer(QNormW, "self_attn.q_norm.weight", HS),
		layer(KNormW, "self_attn.k_norm.weight", HS),
		layer(AttProjW, "self_attn.o_proj.weight", C, NH*HS),
		layer(LN2W, "post_attention_layernorm.weight", C),
		parts(GateUpW, C, arch.TensorPart{File: "mlp.gate_proj.weight", Rows: I},
			arch.TensorPart{File: "mlp.up_proj.weight", Rows: I}),
		layer(DownW, "mlp.down_proj.weight", C, I),
		{Name: NormW, Shape: []int{C}, File: "model.norm.weight"},
	}
}

// fileName keeps every name but the LM head, which is tied to
// embed_tokens (a checkpoint may still carry a copy of it).
func fileName(name string) (string, bool) {
	if name == "lm_head.weight" {
		return "", false
	}
	return name, true
}

// initRandom draws like Hugging Face initialises a fresh Qwen3ForCausalLM
// (PreTrainedModel._init_weights with initializer_range 0.02): matrices and
// the embedding normal with std 0.02, RMSNorm weights (the layer norms,
// q_norm, k_norm and the final norm) exactly 1.
func initRandom(_ arch.Config, fileName string) (mean, std float64) {
	if strings.HasSuffix(fileName, "norm.weight") {
		return 1, 0
	}
	return 0, 0.02
}
