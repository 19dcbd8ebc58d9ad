package gpt2

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/roseinfer/roseinfer/engine/model/arch"
)

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

// parseConfig decodes config.json bytes and rejects GPT-2 variants the
// Program does not implement, so that a checkpoint never loads into the
// wrong math.
func parseConfig(data []byte) (arch.Config, error) {
	var h hfConfig
	if err := json.Unmarshal(data, &h); err != nil {
		return arch.Config{}, fmt.Errorf("decode config.json: %w", err)
	}
	if h.ModelType != "" && h.ModelType != "gpt2" {
		return arch.Config{}, fmt.Errorf("model_type %q is not GPT-2", h.ModelType)
	}
	if h.ActivationFunction != nil && *h.ActivationFunction != "gelu_new" && *h.ActivationFunction != "gelu_pytorch_tanh" {
		return arch.Config{}, fmt.Errorf("activation_function %q is not supported (only gelu_new)", *h.ActivationFunction)
	}
	if isTrue(h.ScaleAttnByInverseLayerIdx) {
		return arch.Config{}, errors.New("scale_attn_by_inverse_layer_idx=true is not supported")
	}
	if h.ScaleAttnWeights != nil && !*h.ScaleAttnWeights {
		return arch.Config{}, errors.New("scale_attn_weights=false is not supported")
	}
	if h.TieWordEmbeddings != nil && !*h.TieWordEmbeddings {
		return arch.Config{}, errors.New("tie_word_embeddings=false is not supported (the LM head is wte)")
	}
	if isTrue(h.AddCrossAttention) {
		return arch.Config{}, errors.New("add_cross_attention=true is not supported")
	}
	c := arch.Config{
		Family:           "gpt2",
		NumLayers:        intOr(h.NLayer, hfDefaultLayers),
		NumHeads:         intOr(h.NHead, hfDefaultHeads),
		Channels:         intOr(h.NEmbd, hfDefaultEmbd),
		MaxSeqLen:        intOr(h.NPositions, intOr(h.NCtx, hfDefaultPositions)),
		VocabSize:        intOr(h.VocabSize, VocabSize),
		LayerNormEpsilon: 1e-5,
		EOSTokenID:       int32(intOr(h.EOSTokenID, eos)),
	}
	if h.LayerNormEpsilon != nil {
		c.LayerNormEpsilon = float32(*h.LayerNormEpsilon)
	}
	if h.NInner != nil && *h.NInner != 4*c.Channels {
		return arch.Config{}, fmt.Errorf("n_inner %d is not supported (only 4*n_embd = %d)", *h.NInner, 4*c.Channels)
	}
	c = complete(c)
	if err := c.Validate(); err != nil {
		return arch.Config{}, err
	}
	return c, nil
}

// configJSON encodes config.json with the keys transformers' GPT2Config
// uses, so GPT2LMHeadModel.from_pretrained reads it as the same model.
func configJSON(c arch.Config, torchDtype string) ([]byte, error) {
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
	return json.MarshalIndent(h, "", "  ")
}

func intOr(p *int, def int) int {
	if p == nil {
		return def
	}
	return *p
}

func isTrue(p *bool) bool { return p != nil && *p }

func ptr[T any](v T) *T { return &v }
