// Package model holds the GPT-2 family: its configuration, its weights as one
// struct of named fp32 tensors, the Hugging Face checkpoint directory format
// (config.json + model.safetensors) in both directions, and deterministic
// random weights for the presets.
//
// It owns no compute: devices (engine/device/cpu, engine/device/cuda) read the
// Weights and run the forward. It imports nothing from the engine.
//
// Size letters, used in shape comments across engine/ (as in llm.c):
//
//	L    number of layers           (n_layer)
//	NH   number of attention heads  (n_head)
//	C    channels                   (n_embd)
//	HS   head size, C / NH
//	V    vocabulary size            (vocab_size)
//	maxT maximum sequence length    (n_positions)
//	T    tokens of one sequence, T <= maxT
//	BT   tokens of one forward step (all sequences of a batch, flattened)
package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
)

// Config is what the forward needs to know about a GPT-2 model.
type Config struct {
	NumLayers        int     // L, n_layer
	NumHeads         int     // NH, n_head
	Channels         int     // C, n_embd
	MaxSeqLen        int     // maxT, n_positions
	VocabSize        int     // V, vocab_size
	LayerNormEpsilon float32 // layer_norm_epsilon (1e-5 for every GPT-2)
	EOSTokenID       int32   // eos_token_id (50256, "<|endoftext|>")
}

// GPT2VocabSize is the real GPT-2 vocabulary, kept by every preset so that the
// tokenizer and the benchmark prompts are the real ones.
const GPT2VocabSize = 50257

// gpt2EOS is "<|endoftext|>", GPT-2's only special token.
const gpt2EOS = 50256

// presets are the built-in model shapes. Weights of a preset are a pure
// function of (preset, seed): see InitRandom.
//
// tiny is sized for the CPU path: with V = 50257 the LM head (V·C
// multiply-adds per sampled token) dominates, so C sets the speed. C = 64 with
// one head of 64 keeps the usual head size; two layers keep the layer loop
// honest. BenchmarkDecode32 (engine/device/cpu: 32 sequences decoding at
// contexts of 100-385) measured about 1,300-1,500 tokens per CPU-second on the
// 2-core dev machine, i.e. about 2,400-2,600 tokens/s when both cores are free.
var presets = map[string]Config{
	"tiny":        {NumLayers: 2, NumHeads: 1, Channels: 64, MaxSeqLen: 1024, VocabSize: GPT2VocabSize, LayerNormEpsilon: 1e-5, EOSTokenID: gpt2EOS},
	"gpt2":        {NumLayers: 12, NumHeads: 12, Channels: 768, MaxSeqLen: 1024, VocabSize: GPT2VocabSize, LayerNormEpsilon: 1e-5, EOSTokenID: gpt2EOS},
	"gpt2-medium": {NumLayers: 24, NumHeads: 16, Channels: 1024, MaxSeqLen: 1024, VocabSize: GPT2VocabSize, LayerNormEpsilon: 1e-5, EOSTokenID: gpt2EOS},
}

// Preset returns the configuration of a built-in model ("tiny", "gpt2",
// "gpt2-medium").
func Preset(name string) (Config, error) {
	c, ok := presets[name]
	if !ok {
		return Config{}, fmt.Errorf("model: unknown preset %q (known: %v)", name, PresetNames())
	}
	return c, nil
}

// PresetNames lists the built-in presets, sorted.
func PresetNames() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// HeadSize is HS = C / NH.
func (c Config) HeadSize() int { return c.Channels / c.NumHeads }

// Validate checks the sizes the forward relies on.
func (c Config) Validate() error {
	switch {
	case c.NumLayers < 1:
		return fmt.Errorf("model: n_layer %d < 1", c.NumLayers)
	case c.NumHeads < 1:
		return fmt.Errorf("model: n_head %d < 1", c.NumHeads)
	case c.Channels < 1 || c.Channels%c.NumHeads != 0:
		return fmt.Errorf("model: n_embd %d is not a positive multiple of n_head %d", c.Channels, c.NumHeads)
	case c.MaxSeqLen < 1:
		return fmt.Errorf("model: n_positions %d < 1", c.MaxSeqLen)
	case c.VocabSize < 2:
		return fmt.Errorf("model: vocab_size %d < 2", c.VocabSize)
	case !(c.LayerNormEpsilon > 0):
		return fmt.Errorf("model: layer_norm_epsilon %g must be > 0", c.LayerNormEpsilon)
	case c.EOSTokenID < 0 || int(c.EOSTokenID) >= c.VocabSize:
		return fmt.Errorf("model: eos_token_id %d outside vocab of %d", c.EOSTokenID, c.VocabSize)
	}
	// The whole parameter count must fit an int index (it does on 64-bit for
	// any real GPT-2; this catches absurd configs before a huge allocation).
	if n := c.numParameters(); n <= 0 || n > 1<<40 {
		return fmt.Errorf("model: config gives %d parameters", n)
	}
	return nil
}

// hfConfig is config.json as Hugging Face's GPT2Config writes it. Pointers
// mark keys whose absence means "the GPT2Config default".
type hfConfig struct {
	ModelType                  string   `json:"model_type"`
	Architectures              []string `json:"architectures,omitempty"`
	ActivationFunction         *string  `json:"activation_function,omitempty"`
	NLayer                     *int     `json:"n_layer,omitempty"`
	NHead                      *int     `json:"n_head,omitempty"`
	NEmbd                      *int     `json:"n_embd,omitempty"`
	NPositions                 *int     `json:"n_positions,omitempty"`
	NCtx                       *int     `json:"n_ctx,omitempty"`
	NInner                     *int     `json:"n_inner"`
	VocabSize                  *int     `json:"vocab_size,omitempty"`
	LayerNormEpsilon           *float64 `json:"layer_norm_epsilon,omitempty"`
	BOSTokenID                 *int     `json:"bos_token_id,omitempty"`
	EOSTokenID                 *int     `json:"eos_token_id,omitempty"`
	InitializerRange           float64  `json:"initializer_range,omitempty"`
	AttnPdrop                  float64  `json:"attn_pdrop"`
	EmbdPdrop                  float64  `json:"embd_pdrop"`
	ResidPdrop                 float64  `json:"resid_pdrop"`
	ScaleAttnWeights           *bool    `json:"scale_attn_weights,omitempty"`
	ScaleAttnByInverseLayerIdx *bool    `json:"scale_attn_by_inverse_layer_idx,omitempty"`
	ReorderAndUpcastAttn       *bool    `json:"reorder_and_upcast_attn,omitempty"`
	TieWordEmbeddings          *bool    `json:"tie_word_embeddings,omitempty"`
	UseCache                   *bool    `json:"use_cache,omitempty"`
	TorchDtype                 string   `json:"torch_dtype,omitempty"`
	AddCrossAttention          *bool    `json:"add_cross_attention,omitempty"`
}

// GPT2Config defaults for absent keys (transformers' GPT2Config.__init__).
const (
	hfDefaultLayers    = 12
	hfDefaultHeads     = 12
	hfDefaultEmbd      = 768
	hfDefaultPositions = 1024
)

// ReadConfig reads an HF GPT-2 config.json.
func ReadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("model: read config: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("model: %s: %w", path, err)
	}
	return c, nil
}

// ParseConfig decodes config.json bytes and rejects GPT-2 variants the forward
// does not implement, so that a checkpoint never loads into the wrong math.
func ParseConfig(data []byte) (Config, error) {
	var h hfConfig
	if err := json.Unmarshal(data, &h); err != nil {
		return Config{}, fmt.Errorf("decode config.json: %w", err)
	}
	if h.ModelType != "" && h.ModelType != "gpt2" {
		return Config{}, fmt.Errorf("model_type %q is not supported (only gpt2)", h.ModelType)
	}
	if h.ActivationFunction != nil && *h.ActivationFunction != "gelu_new" && *h.ActivationFunction != "gelu_pytorch_tanh" {
		return Config{}, fmt.Errorf("activation_function %q is not supported (only gelu_new)", *h.ActivationFunction)
	}
	if isTrue(h.ScaleAttnByInverseLayerIdx) {
		return Config{}, errors.New("scale_attn_by_inverse_layer_idx=true is not supported")
	}
	if h.ScaleAttnWeights != nil && !*h.ScaleAttnWeights {
		return Config{}, errors.New("scale_attn_weights=false is not supported")
	}
	if h.TieWordEmbeddings != nil && !*h.TieWordEmbeddings {
		return Config{}, errors.New("tie_word_embeddings=false is not supported (the LM head is wte)")
	}
	if isTrue(h.AddCrossAttention) {
		return Config{}, errors.New("add_cross_attention=true is not supported")
	}
	c := Config{
		NumLayers:        intOr(h.NLayer, hfDefaultLayers),
		NumHeads:         intOr(h.NHead, hfDefaultHeads),
		Channels:         intOr(h.NEmbd, hfDefaultEmbd),
		MaxSeqLen:        intOr(h.NPositions, intOr(h.NCtx, hfDefaultPositions)),
		VocabSize:        intOr(h.VocabSize, GPT2VocabSize),
		LayerNormEpsilon: 1e-5,
		EOSTokenID:       int32(intOr(h.EOSTokenID, gpt2EOS)),
	}
	if h.LayerNormEpsilon != nil {
		c.LayerNormEpsilon = float32(*h.LayerNormEpsilon)
	}
	if h.NInner != nil && *h.NInner != 4*c.Channels {
		return Config{}, fmt.Errorf("n_inner %d is not supported (only 4*n_embd = %d)", *h.NInner, 4*c.Channels)
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// WriteConfig writes config.json with the keys transformers' GPT2Config uses,
// so GPT2LMHeadModel.from_pretrained reads it as the same model. torchDtype is
// the safetensors dtype written beside it ("float32", "float16", "bfloat16").
func WriteConfig(path string, c Config, torchDtype string) error {
	if err := c.Validate(); err != nil {
		return err
	}
	eos := int(c.EOSTokenID)
	act := "gelu_new"
	// Through the shortest decimal form: 1e-5, not 9.999999747378752e-06.
	eps, _ := strconv.ParseFloat(strconv.FormatFloat(float64(c.LayerNormEpsilon), 'g', -1, 32), 64)
	h := hfConfig{
		ModelType:                  "gpt2",
		Architectures:              []string{"GPT2LMHeadModel"},
		ActivationFunction:         &act,
		NLayer:                     &c.NumLayers,
		NHead:                      &c.NumHeads,
		NEmbd:                      &c.Channels,
		NPositions:                 &c.MaxSeqLen,
		NCtx:                       &c.MaxSeqLen,
		VocabSize:                  &c.VocabSize,
		LayerNormEpsilon:           &eps,
		BOSTokenID:                 &eos,
		EOSTokenID:                 &eos,
		InitializerRange:           0.02,
		AttnPdrop:                  0.1,
		EmbdPdrop:                  0.1,
		ResidPdrop:                 0.1,
		ScaleAttnWeights:           ptr(true),
		ScaleAttnByInverseLayerIdx: ptr(false),
		ReorderAndUpcastAttn:       ptr(false),
		TieWordEmbeddings:          ptr(true),
		UseCache:                   ptr(true),
		TorchDtype:                 torchDtype,
	}
	data, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return fmt.Errorf("model: encode config: %w", err)
	}
	return writeFileAtomic(path, append(data, '\n'))
}

// writeFileAtomic writes through a temporary file and a rename, so a reader
// never sees half a checkpoint file.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("model: create %s: %w", path, err)
	}
	_, werr := tmp.Write(data)
	if werr == nil {
		werr = tmp.Chmod(0o644) // CreateTemp makes 0600; checkpoints are shared files
	}
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("model: write %s: %w", path, werr)
	}
	return nil
}

func intOr(p *int, def int) int {
	if p == nil {
		return def
	}
	return *p
}

func isTrue(p *bool) bool { return p != nil && *p }

func ptr[T any](v T) *T { return &v }
