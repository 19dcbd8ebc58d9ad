package qwen3

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/roseinfer/roseinfer/engine/model/arch"
)

// hfConfig is config.json as Hugging Face's Qwen3Config writes it. Pointers
// mark keys whose absence means "the Qwen3Config default"; raw messages
// hold keys that may be null, a number or a list.
type hfConfig struct {
	ModelType             string          `json:"model_type"`
	Architectures         []string        `json:"architectures,omitempty"`
	HiddenSize            *int            `json:"hidden_size,omitempty"`
	IntermediateSize      *int            `json:"intermediate_size,omitempty"`
	NumHiddenLayers       *int            `json:"num_hidden_layers,omitempty"`
	NumAttentionHeads     *int            `json:"num_attention_heads,omitempty"`
	NumKeyValueHeads      *int            `json:"num_key_value_heads,omitempty"`
	HeadDim               *int            `json:"head_dim,omitempty"`
	MaxPositionEmbeddings *int            `json:"max_position_embeddings,omitempty"`
	RMSNormEps            *float64        `json:"rms_norm_eps,omitempty"`
	RopeTheta             *float64        `json:"rope_theta,omitempty"`
	RopeScaling           json.RawMessage `json:"rope_scaling"`
	RopeParameters        json.RawMessage `json:"rope_parameters,omitempty"` // transformers 5's spelling
	VocabSize             *int            `json:"vocab_size,omitempty"`
	TieWordEmbeddings     *bool           `json:"tie_word_embeddings,omitempty"`
	AttentionBias         *bool           `json:"attention_bias,omitempty"`
	AttentionDropout      float64         `json:"attention_dropout"`
	HiddenAct             *string         `json:"hidden_act,omitempty"`
	UseSlidingWindow      *bool           `json:"use_sliding_window,omitempty"`
	SlidingWindow         json.RawMessage `json:"sliding_window,omitempty"`
	MaxWindowLayers       *int            `json:"max_window_layers,omitempty"`
	BOSTokenID            json.RawMessage `json:"bos_token_id,omitempty"`
	EOSTokenID            json.RawMessage `json:"eos_token_id,omitempty"`
	InitializerRange      float64         `json:"initializer_range,omitempty"`
	UseCache              *bool           `json:"use_cache,omitempty"`
	TorchDtype            string          `json:"torch_dtype,omitempty"`
	Dtype                 string          `json:"dtype,omitempty"` // transformers 5's spelling
}

// Qwen3Config defaults for absent keys (transformers' Qwen3Config.__init__).
const (
	hfDefaultHidden       = 4096
	hfDefaultIntermediate = 22016
	hfDefaultLayers       = 32
	hfDefaultHeads        = 32
	hfDefaultHeadDim      = 128
	hfDefaultPositions    = 32768
	hfDefaultEps          = 1e-6
	hfDefaultRopeTheta    = 10000
)

// parseConfig decodes config.json bytes and rejects Qwen3 variants the
// Program does not implement, naming the key, so that a checkpoint never
// loads into the wrong math.
func parseConfig(data []byte) (arch.Config, error) {
	var h hfConfig
	if err := json.Unmarshal(data, &h); err != nil {
		return arch.Config{}, fmt.Errorf("decode config.json: %w", err)
	}
	if h.ModelType != "qwen3" {
		return arch.Config{}, fmt.Errorf("model_type %q is not Qwen3", h.ModelType)
	}
	if h.HiddenAct != nil && *h.HiddenAct != "silu" {
		return arch.Config{}, fmt.Errorf("hidden_act %q is not supported (only silu)", *h.HiddenAct)
	}
	if h.AttentionBias != nil && *h.AttentionBias {
		return arch.Config{}, errors.New("attention_bias=true is not supported")
	}
	if h.TieWordEmbeddings == nil || !*h.TieWordEmbeddings {
		return arch.Config{}, errors.New("tie_word_embeddings=false (Qwen3Config's default when absent) is not supported: the LM head is embed_tokens")
	}
	if h.UseSlidingWindow != nil && *h.UseSlidingWindow {
		return arch.Config{}, errors.New("use_sliding_window=true is not supported")
	}
	if !isNull(h.RopeScaling) {
		return arch.Config{}, fmt.Errorf("rope_scaling %s is not supported (only null)", h.RopeScaling)
	}
	theta := floatOr(h.RopeTheta, hfDefaultRopeTheta)
	if !isNull(h.RopeParameters) {
		var rp struct {
			RopeType  string   `json:"rope_type"`
			RopeTheta *float64 `json:"rope_theta"`
		}
		if err := json.Unmarshal(h.RopeParameters, &rp); err != nil {
			return arch.Config{}, fmt.Errorf("rope_parameters: %w", err)
		}
		if rp.RopeType != "" && rp.RopeType != "default" {
			return arch.Config{}, fmt.Errorf("rope_parameters.rope_type %q is not supported (only default)", rp.RopeType)
		}
		theta = floatOr(rp.RopeTheta, theta)
	}
	eos, err := firstID(h.EOSTokenID, EOSTokenID)
	if err != nil {
		return arch.Config{}, fmt.Errorf("eos_token_id: %w", err)
	}
	c := arch.Config{
		Family:           "qwen3",
		NumLayers:        intOr(h.NumHiddenLayers, hfDefaultLayers),
		NumHeads:         intOr(h.NumAttentionHeads, hfDefaultHeads),
		HeadDim:          intOr(h.HeadDim, hfDefaultHeadDim),
		Channels:         intOr(h.HiddenSize, hfDefaultHidden),
		Intermediate:     intOr(h.IntermediateSize, hfDefaultIntermediate),
		MaxSeqLen:        intOr(h.MaxPositionEmbeddings, hfDefaultPositions),
		VocabSize:        intOr(h.VocabSize, VocabSize),
		LayerNormEpsilon: float32(floatOr(h.RMSNormEps, hfDefaultEps)),
		EOSTokenID:       int32(eos),
		RopeTheta:        theta,
	}
	c.NumKVHeads = intOr(h.NumKeyValueHeads, c.NumHeads)
	if err := c.Validate(); err != nil {
		return arch.Config{}, err
	}
	return c, nil
}

// configJSON encodes config.json with the keys of Qwen/Qwen3-0.6B's, so
// Qwen3ForCausalLM.from_pretrained reads it as the same model.
func configJSON(c arch.Config, torchDtype string) ([]byte, error) {
	// Through the shortest decimal form: 1e-06, not 9.999999974752427e-07.
	eps, _ := strconv.ParseFloat(strconv.FormatFloat(float64(c.LayerNormEpsilon), 'g', -1, 32), 64)
	act := "silu"
	h := hfConfig{
		ModelType:             "qwen3",
		Architectures:         []string{"Qwen3ForCausalLM"},
		HiddenSize:            &c.Channels,
		IntermediateSize:      &c.Intermediate,
		NumHiddenLayers:       &c.NumLayers,
		NumAttentionHeads:     &c.NumHeads,
		NumKeyValueHeads:      &c.NumKVHeads,
		HeadDim:               &c.HeadDim,
		MaxPositionEmbeddings: &c.MaxSeqLen,
		RMSNormEps:            &eps,
		RopeTheta:             &c.RopeTheta,
		RopeScaling:           json.RawMessage("null"),
		VocabSize:             &c.VocabSize,
		TieWordEmbeddings:     ptr(true),
		AttentionBias:         ptr(false),
		HiddenAct:             &act,
		UseSlidingWindow:      ptr(false),
		SlidingWindow:         json.RawMessage("null"),
		MaxWindowLayers:       &c.NumLayers,
		BOSTokenID:            json.RawMessage(strconv.Itoa(BOSTokenID)),
		EOSTokenID:            json.RawMessage(strconv.Itoa(int(c.EOSTokenID))),
		InitializerRange:      0.02,
		UseCache:              ptr(true),
		TorchDtype:            torchDtype,
	}
	return json.MarshalIndent(h, "", "  ")
}

// GenerationConfigJSON is generation_config.json as Qwen/Qwen3-0.6B's
// carries it for stopping: bos and both stop ids, <|im_end|> first. The Go
// Config keeps one EOSTokenID (c's); the list is for readers of the file.
func GenerationConfigJSON(c arch.Config) ([]byte, error) {
	eos := []int{int(c.EOSTokenID)}
	if c.EOSTokenID != EndOfTextTokenID {
		eos = append(eos, EndOfTextTokenID)
	}
	return json.MarshalIndent(struct {
		BOSTokenID int   `json:"bos_token_id"`
		EOSTokenID []int `json:"eos_token_id"`
	}{BOSTokenID, eos}, "", "  ")
}

// firstID reads a token id that config.json may spell as a number or a
// list of numbers (the first one counts); absent or null gives def.
func firstID(raw json.RawMessage, def int) (int, error) {
	if isNull(raw) {
		return def, nil
	}
	var one int
	if err := json.Unmarshal(raw, &one); err == nil {
		return one, nil
	}
	var list []int
	if err := json.Unmarshal(raw, &list); err != nil || len(list) == 0 {
		return 0, fmt.Errorf("%s is neither an id nor a list of ids", raw)
	}
	return list[0], nil
}

func isNull(raw json.RawMessage) bool {
	return len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

func intOr(p *int, def int) int {
	if p == nil {
		return def
	}
	return *p
}

func floatOr(p *float64, def float64) float64 {
	if p == nil {
		return def
	}
	return *p
}

func ptr[T any](v T) *T { return &v }
