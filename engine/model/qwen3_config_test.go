package model

import (
	"path/filepath"
	"strings"
	"testing"
)

// qwen3_0_6b is Qwen/Qwen3-0.6B's config.json as the hub carries it.
const qwen3_0_6b = `{
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
  "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936}`

// TestParseQwen3Config: the published config is the preset; variants the
// Program does not implement fail naming their key.
func TestParseQwen3Config(t *testing.T) {
	preset, err := Preset("qwen3-0.6b")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseConfig([]byte(qwen3_0_6b))
	if err != nil {
		t.Fatal(err)
	}
	if got != preset {
		t.Errorf("Qwen3-0.6B's config.json gives %+v, preset %+v", got, preset)
	}
	edit := func(old, new string) string { return strings.Replace(qwen3_0_6b, old, new, 1) }
	for _, tc := range []struct{ name, json, wantErr string }{
		{"rope scaling", edit(`"rope_scaling": null`, `"rope_scaling": {"rope_type": "yarn", "factor": 4}`), "rope_scaling"},
		{"untied", edit(`"tie_word_embeddings": true`, `"tie_word_embeddings": false`), "tie_word_embeddings"},
		{"tie absent", edit(`"tie_word_embeddings": true,`, ``), "tie_word_embeddings"},
		{"attention bias", edit(`"attention_bias": false`, `"attention_bias": true`), "attention_bias"},
		{"gelu", edit(`"hidden_act": "silu"`, `"hidden_act": "gelu"`), "hidden_act"},
		{"sliding window", edit(`"use_sliding_window": false`, `"use_sliding_window": true`), "use_sliding_window"},
		{"heads do not group", edit(`"num_key_value_heads": 8`, `"num_key_value_heads": 6`), "num_key_value_heads"},
		{"odd head_dim", edit(`"head_dim": 128`, `"head_dim": 127`), "head_dim"},
		{"eos outside vocab", edit(`"eos_token_id": 151645`, `"eos_token_id": 200000`), "eos_token_id"},
		{"rope type", edit(`"rope_theta": 1000000`, `"rope_parameters": {"rope_type": "llama3", "rope_theta": 5e5}`), "rope_type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseConfig([]byte(tc.json)); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want one naming %q", err, tc.wantErr)
			}
		})
	}
	// transformers 5 spells rope_theta inside rope_parameters and may list
	// the EOS ids.
	v5 := edit(`"rope_theta": 1000000`, `"rope_parameters": {"rope_type": "default", "rope_theta": 1000000}`)
	v5 = strings.Replace(v5, `"eos_token_id": 151645`, `"eos_token_id": [151645, 151643]`, 1)
	if got, err := ParseConfig([]byte(v5)); err != nil || got != preset {
		t.Errorf("transformers 5 spelling: %+v, %v", got, err)
	}
}

func TestQwen3ConfigRoundTrip(t *testing.T) {
	for _, name := range []string{"qwen3-tiny", "qwen3-0.6b"} {
		c, _ := Preset(name)
		path := filepath.Join(t.TempDir(), "config.json")
		if err := WriteConfig(path, c, "bfloat16"); err != nil {
			t.Fatal(err)
		}
		got, err := ReadConfig(path)
		if err != nil {
			t.Fatal(err)
		}
		if got != c {
			t.Errorf("%s round trip: got %+v, want %+v", name, got, c)
		}
	}
}
