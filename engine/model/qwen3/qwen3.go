// Package qwen3 is the Qwen3 dense family in one place (transformers'
// Qwen3ForCausalLM): its HF config.json, its presets, its tensors (HF's
// names in nn.Linear's (out, in) layout, q/k/v and gate/up stacked into one
// matrix each), its random initialisation, its forward pass as ops, its
// tokenizer kind and its chat format. engine/model registers it; devices see
// only the Program and the Weights.
package qwen3

import (
	"fmt"

	qwen3chat "github.com/roseinfer/roseinfer/engine/chat/qwen3"
	"github.com/roseinfer/roseinfer/engine/model/arch"
)

// VocabSize is the real Qwen3 vocabulary (151,643 BPE tokens, the special
// tokens and padding to a multiple of 128), kept by every preset.
const VocabSize = 151936

// Special tokens of Qwen3's tokenizer that the checkpoint files name.
const (
	BOSTokenID       = 151643 // "<|endoftext|>", config.json's bos_token_id
	EOSTokenID       = 151645 // "<|im_end|>", which ends a chat turn
	EndOfTextTokenID = 151643 // "<|endoftext|>", the second stop id of generation_config.json
)

// TokenizerKind is Qwen2's byte-level BPE (tokenizer.json with the Qwen2
// split regex), which Qwen3 checkpoints carry; engine/launch maps it.
const TokenizerKind = "qwen2-bpe"

// Family is Qwen3 (transformers' Qwen3ForCausalLM), dense models with tied
// embeddings.
var Family = arch.Family{
	Name:          "qwen3",
	Title:         "Qwen3",
	Presets:       presets,
	TokenizerKind: TokenizerKind,
	// The chat template of Qwen3's tokenizer_config.json, held to
	// transformers' apply_chat_template by its golden test.
	Chat:        qwen3chat.Render,
	ParseConfig: parseConfig,
	ConfigJSON:  configJSON,
	Complete:    complete,
	Validate:    validate,
	Tensors:     tensors,
	FileName:    fileName,
	InitRandom:  initRandom,
	Program:     program,
}

// presets are the built-in shapes. qwen3-0.6b is Qwen/Qwen3-0.6B's.
// qwen3-tiny is sized for the CPU path and tests: the real vocabulary (so
// the real tokenizer fits), two layers, and 4 query heads of 32 over 2 KV
// heads, so NH·HS = 128 differs from C = 64 as Qwen3 allows and grouped
// attention is exercised.
var presets = map[string]arch.Config{
	"qwen3-0.6b": {Family: "qwen3", NumLayers: 28, NumHeads: 16, NumKVHeads: 8, HeadDim: 128, Channels: 1024,
		Intermediate: 3072, MaxSeqLen: 40960, VocabSize: VocabSize, LayerNormEpsilon: 1e-6, EOSTokenID: EOSTokenID,
		RopeTheta: 1e6},
	"qwen3-tiny": {Family: "qwen3", NumLayers: 2, NumHeads: 4, NumKVHeads: 2, HeadDim: 32, Channels: 64,
		Intermediate: 128, MaxSeqLen: 2048, VocabSize: VocabSize, LayerNormEpsilon: 1e-6, EOSTokenID: EOSTokenID,
		RopeTheta: 1e6},
}

// complete derives what a Go literal may leave out, as Qwen3Config's
// defaults do: as many KV heads as query heads, and head_dim 128.
func complete(c arch.Config) arch.Config {
	if c.NumKVHeads == 0 {
		c.NumKVHeads = c.NumHeads
	}
	if c.HeadDim == 0 {
		c.HeadDim = hfDefaultHeadDim
	}
	return c
}

// validate checks the sizes Qwen3's Program relies on, in config.json's words.
func validate(c arch.Config) error {
	switch {
	case c.NumLayers < 1:
		return fmt.Errorf("num_hidden_layers %d < 1", c.NumLayers)
	case c.NumHeads < 1:
		return fmt.Errorf("num_attention_heads %d < 1", c.NumHeads)
	case c.NumKVHeads < 1 || c.NumHeads%c.NumKVHeads != 0:
		return fmt.Errorf("num_key_value_heads %d does not divide num_attention_heads %d", c.NumKVHeads, c.NumHeads)
	case c.HeadDim < 2 || c.HeadDim%2 != 0:
		return fmt.Errorf("head_dim %d is not a positive even number (rotary positions turn pairs)", c.HeadDim)
	case c.Channels < 1:
		return fmt.Errorf("hidden_size %d < 1", c.Channels)
	case c.Intermediate < 1:
		return fmt.Errorf("intermediate_size %d < 1", c.Intermediate)
	case c.MaxSeqLen < 1:
		return fmt.Errorf("max_position_embeddings %d < 1", c.MaxSeqLen)
	case c.VocabSize < 2:
		return fmt.Errorf("vocab_size %d < 2", c.VocabSize)
	case !(c.LayerNormEpsilon > 0):
		return fmt.Errorf("rms_norm_eps %g must be > 0", c.LayerNormEpsilon)
	case !(c.RopeTheta > 0):
		return fmt.Errorf("rope_theta %g must be > 0", c.RopeTheta)
	case c.EOSTokenID < 0 || int(c.EOSTokenID) >= c.VocabSize:
		return fmt.Errorf("eos_token_id %d outside vocab of %d", c.EOSTokenID, c.VocabSize)
	}
	return nil
}

func init() { arch.Register(&Family) }
