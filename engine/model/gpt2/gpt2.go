// Package gpt2 is the GPT-2 family in one place: its HF config.json, its
// presets, its tensors (llm.c's names, HF's checkpoint names and Conv1D
// layout), its random initialisation, its forward pass as ops in llm.c's
// order, its tokenizer kind and its chat format. engine/model registers it;
// devices see only the Program and the Weights.
package gpt2

import (
	"fmt"

	"github.com/roseinfer/roseinfer/engine/model/arch"
)

// VocabSize is the real GPT-2 vocabulary, kept by every preset so that the
// tokenizer and the benchmark prompts are the real ones.
const VocabSize = 50257

// eos is "<|endoftext|>", GPT-2's only special token.
const eos = 50256

// TokenizerKind is GPT-2's byte-level BPE (r50k), which engine/tokenizer
// carries built in.
const TokenizerKind = "gpt2-bpe"

// Family is GPT-2 (transformers' GPT2LMHeadModel).
var Family = arch.Family{
	Name:          "gpt2",
	Title:         "GPT-2",
	Presets:       presets,
	TokenizerKind: TokenizerKind,
	Chat:          arch.PlainChat, // GPT-2 has no chat template
	ParseConfig:   parseConfig,
	ConfigJSON:    configJSON,
	Complete:      complete,
	Validate:      validate,
	Tensors:       tensors,
	FileName:      fileName,
	InitRandom:    initRandom,
	Program:       program,
}

// presets are the built-in model shapes.
//
// tiny is sized for the CPU path: with V = 50257 the LM head (V·C
// multiply-adds per sampled token) dominates, so C sets the speed. C = 64 with
// one head of 64 keeps the usual head size; two layers keep the layer loop
// honest. BenchmarkDecode32 (engine/device/cpu: 32 sequences decoding at
// contexts of 100-385) measured about 1,300-1,500 tokens per CPU-second on the
// 2-core dev machine, i.e. about 2,400-2,600 tokens/s when both cores are free.
var presets = map[string]arch.Config{
	"tiny":        preset(2, 1, 64),
	"gpt2":        preset(12, 12, 768),
	"gpt2-medium": preset(24, 16, 1024),
}

func preset(numLayers, numHeads, channels int) arch.Config {
	return complete(arch.Config{Family: "gpt2", NumLayers: numLayers, NumHeads: numHeads, Channels: channels,
		MaxSeqLen: 1024, VocabSize: VocabSize, LayerNormEpsilon: 1e-5, EOSTokenID: eos})
}

// complete derives what GPT-2 does not configure: every head has its own
// keys and values, heads split C, and the MLP is 4C wide.
func complete(c arch.Config) arch.Config {
	if c.NumKVHeads == 0 {
		c.NumKVHeads = c.NumHeads
	}
	if c.HeadDim == 0 && c.NumHeads > 0 {
		c.HeadDim = c.Channels / c.NumHeads
	}
	if c.Intermediate == 0 {
		c.Intermediate = 4 * c.Channels
	}
	return c
}

// validate checks the sizes GPT-2's Program relies on, in config.json's words.
func validate(c arch.Config) error {
	switch {
	case c.NumLayers < 1:
		return fmt.Errorf("n_layer %d < 1", c.NumLayers)
	case c.NumHeads < 1:
		return fmt.Errorf("n_head %d < 1", c.NumHeads)
	case c.Channels < 1 || c.Channels%c.NumHeads != 0:
		return fmt.Errorf("n_embd %d is not a positive multiple of n_head %d", c.Channels, c.NumHeads)
	case c.NumKVHeads != c.NumHeads || c.HeadDim != c.Channels/c.NumHeads:
		return fmt.Errorf("GPT-2 has n_head heads of n_embd/n_head: %d KV heads of %d do not fit", c.NumKVHeads, c.HeadDim)
	case c.Intermediate != 4*c.Channels:
		return fmt.Errorf("n_inner %d is not supported (only 4*n_embd = %d)", c.Intermediate, 4*c.Channels)
	case c.MaxSeqLen < 1:
		return fmt.Errorf("n_positions %d < 1", c.MaxSeqLen)
	case c.VocabSize < 2:
		return fmt.Errorf("vocab_size %d < 2", c.VocabSize)
	case !(c.LayerNormEpsilon > 0):
		return fmt.Errorf("layer_norm_epsilon %g must be > 0", c.LayerNormEpsilon)
	case c.EOSTokenID < 0 || int(c.EOSTokenID) >= c.VocabSize:
		return fmt.Errorf("eos_token_id %d outside vocab of %d", c.EOSTokenID, c.VocabSize)
	}
	return nil
}

func init() { arch.Register(&Family) }
