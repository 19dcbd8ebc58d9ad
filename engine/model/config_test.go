package model

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestPresetsValidate(t *testing.T) {
	for _, name := range PresetNames() {
		c, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if c.Family == "gpt2" && (c.VocabSize != GPT2VocabSize || c.MaxSeqLen != 1024) {
			t.Errorf("%s: V=%d maxT=%d, want the real GPT-2 vocabulary and 1024 positions", name, c.VocabSize, c.MaxSeqLen)
		}
	}
	// The published sizes: 124M and 355M parameters (wte counted once), and
	// Qwen/Qwen3-0.6B's 596M (tied embeddings).
	for name, want := range map[string]int{"gpt2": 124439808, "gpt2-medium": 354823168, "qwen3-0.6b": 596049920} {
		c, _ := Preset(name)
		if got := c.NumParameters(); got != want {
			t.Errorf("%s: %d parameters, want %d", name, got, want)
		}
	}
	if _, err := Preset("gpt3"); err == nil {
		t.Error("unknown preset: no error")
	}
}

// gpt2Config is a complete GPT-2 config: one head of C/NH per head, an MLP
// of 4C, epsilon 1e-5.
func gpt2Config(L, NH, C, maxT, V int, eos int32) Config {
	return Config{Family: "gpt2", NumLayers: L, NumHeads: NH, NumKVHeads: NH, HeadDim: C / NH, Channels: C,
		Intermediate: 4 * C, MaxSeqLen: maxT, VocabSize: V, LayerNormEpsilon: 1e-5, EOSTokenID: eos}
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name    string
		json    string
		want    Config
		wantErr string
	}{
		{"defaults are GPT2Config's", `{"model_type":"gpt2"}`,
			gpt2Config(12, 12, 768, 1024, 50257, 50256), ""},
		{"explicit sizes", `{"n_layer":2,"n_head":1,"n_embd":64,"n_positions":1024,"vocab_size":50257,"layer_norm_epsilon":1e-5,"n_inner":null,"activation_function":"gelu_new"}`,
			gpt2Config(2, 1, 64, 1024, 50257, 50256), ""},
		{"old n_ctx key", `{"n_ctx":512,"n_layer":1,"n_head":1,"n_embd":8,"vocab_size":10,"eos_token_id":9}`,
			gpt2Config(1, 1, 8, 512, 10, 9), ""},
		{"other model type", `{"model_type":"llama"}`, Config{}, `model_type "llama" is not supported (supported: [gpt2 qwen3])`},
		{"relu", `{"activation_function":"relu"}`, Config{}, "activation_function"},
		{"n_inner", `{"n_inner":100}`, Config{}, "n_inner"},
		{"untied", `{"tie_word_embeddings":false}`, Config{}, "tie_word_embeddings"},
		{"inverse layer scaling", `{"scale_attn_by_inverse_layer_idx":true}`, Config{}, "scale_attn_by_inverse_layer_idx"},
		{"heads do not divide", `{"n_embd":10,"n_head":3}`, Config{}, "n_head"},
		{"eos outside vocab", `{"vocab_size":10,"eos_token_id":10}`, Config{}, "eos_token_id"},
		{"zero layers", `{"n_layer":0}`, Config{}, "n_layer"},
		{"not json", `{"n_layer":`, Config{}, "decode"},
		{"wrong type", `{"n_layer":"two"}`, Config{}, "decode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseConfig([]byte(tt.json))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestWriteConfigRoundTrip(t *testing.T) {
	c, _ := Preset("tiny")
	path := filepath.Join(t.TempDir(), "config.json")
	if err := WriteConfig(path, c, "float16"); err != nil {
		t.Fatal(err)
	}
	got, err := ReadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != c {
		t.Errorf("round trip: got %+v, want %+v", got, c)
	}
}
