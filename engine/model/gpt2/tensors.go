package gpt2

import (
	"math"
	"strings"

	"github.com/roseinfer/roseinfer/engine/model/arch"
)

// The canonical tensor names, llm.c's (ParameterTensors). Shapes are the
// canonical (out, in) layout, with a leading L for per-layer tensors.
const (
	WTE      = "wte"      // (V, C) token embedding; also the LM head (tied)
	WPE      = "wpe"      // (maxT, C) position embedding
	LN1W     = "ln1w"     // (L, C) ln_1 weight
	LN1B     = "ln1b"     // (L, C) ln_1 bias
	QKVW     = "qkvw"     // (L, 3C, C) attn.c_attn weight, rows q | k | v
	QKVB     = "qkvb"     // (L, 3C) attn.c_attn bias
	AttProjW = "attprojw" // (L, C, C) attn.c_proj weight
	AttProjB = "attprojb" // (L, C) attn.c_proj bias
	LN2W     = "ln2w"     // (L, C) ln_2 weight
	LN2B     = "ln2b"     // (L, C) ln_2 bias
	FCW      = "fcw"      // (L, 4C, C) mlp.c_fc weight
	FCB      = "fcb"      // (L, 4C) mlp.c_fc bias
	FCProjW  = "fcprojw"  // (L, C, 4C) mlp.c_proj weight
	FCProjB  = "fcprojb"  // (L, C) mlp.c_proj bias
	LNFW     = "lnfw"     // (C) ln_f weight
	LNFB     = "lnfb"     // (C) ln_f bias
)

// tensors lists GPT-2's parameters under GPT2Model's state_dict names
// (without the "transformer." prefix, like the published gpt2 checkpoint;
// lm_head is tied to wte and not stored). HF's Conv1D stores the four
// matrices as (in, out), hence Transposed.
func tensors(c arch.Config) []arch.TensorSpec {
	C, I, V, maxT := c.Channels, c.Intermediate, c.VocabSize, c.MaxSeqLen
	layer := func(name string, file string, transposed bool, shape ...int) arch.TensorSpec {
		return arch.TensorSpec{Name: name, Shape: shape, PerLayer: true, File: "h.%d." + file, Transposed: transposed}
	}
	return []arch.TensorSpec{
		{Name: WTE, Shape: []int{V, C}, File: "wte.weight"},
		{Name: WPE, Shape: []int{maxT, C}, File: "wpe.weight"},
		layer(LN1W, "ln_1.weight", false, C),
		layer(LN1B, "ln_1.bias", false, C),
		layer(QKVW, "attn.c_attn.weight", true, 3*C, C),
		layer(QKVB, "attn.c_attn.bias", false, 3*C),
		layer(AttProjW, "attn.c_proj.weight", true, C, C),
		layer(AttProjB, "attn.c_proj.bias", false, C),
		layer(LN2W, "ln_2.weight", false, C),
		layer(LN2B, "ln_2.bias", false, C),
		layer(FCW, "mlp.c_fc.weight", true, I, C),
		layer(FCB, "mlp.c_fc.bias", false, I),
		layer(FCProjW, "mlp.c_proj.weight", true, C, I),
		layer(FCProjB, "mlp.c_proj.bias", false, C),
		{Name: LNFW, Shape: []int{C}, File: "ln_f.weight"},
		{Name: LNFB, Shape: []int{C}, File: "ln_f.bias"},
	}
}

// fileName accepts names with the "transformer." prefix
// (GPT2LMHeadModel's state_dict) or without (GPT2Model's) and skips what
// GPT-2 checkpoints may carry but the model does not use: the causal-mask
// buffers and the LM head, which is tied to wte.
func fileName(name string) (string, bool) {
	name = strings.TrimPrefix(name, "transformer.")
	if name == "lm_head.weight" || strings.HasSuffix(name, ".attn.bias") || strings.HasSuffix(name, ".attn.masked_bias") {
		return "", false
	}
	return name, true
}

// initRandom draws like Hugging Face initialises a fresh GPT2LMHeadModel
// (GPT2PreTrainedModel._init_weights), with one deliberate difference:
//
//   - wte, wpe, c_attn and c_fc weights: normal, std 0.02 (initializer_range);
//   - attn.c_proj and mlp.c_proj weights: normal, std 0.02/sqrt(2L) (GPT-2's
//     scaling of residual projections);
//   - difference: HF sets layer-norm weights to 1 and every bias to 0. Here
//     layer-norm weights are 1 + 0.1·N(0,1) and all biases (layer-norm and
//     linear) 0.05·N(0,1), so that a forward which drops a bias, swaps the
//     q/k/v split or skips a layer-norm scale disagrees with HF's and the
//     golden tests catch it.
func initRandom(c arch.Config, fileName string) (mean, std float64) {
	switch {
	case strings.HasSuffix(fileName, "c_proj.weight"):
		return 0, 0.02 / math.Sqrt(2*float64(c.NumLayers))
	case strings.Contains(fileName, "ln_") && strings.HasSuffix(fileName, ".weight"):
		return 1, 0.1
	case strings.HasSuffix(fileName, ".bias"):
		return 0, 0.05
	}
	return 0, 0.02
}
