package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/engine/model"
	qwen3data "github.com/roseinfer/roseinfer/engine/tokenizer/data/qwen3"
)

// TestInitModelQwen3: --preset qwen3-tiny writes a Qwen/Qwen3-layout
// directory: config.json of model_type qwen3, bf16 weights by default that
// load back as the preset, generation_config.json with both stop ids, and
// the committed tokenizer files.
func TestInitModelQwen3(t *testing.T) {
	dir := t.TempDir()
	if _, errOut, err := run(t, context.Background(), "init-model", "--preset", "qwen3-tiny", "--seed", "1", "--out", dir); err != nil {
		t.Fatalf("init-model: %v %s", err, errOut)
	}
	w, err := model.LoadCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := model.Preset("qwen3-tiny"); w.Config != want {
		t.Errorf("checkpoint config %+v, preset %+v", w.Config, want)
	}
	var cfg struct {
		ModelType     string   `json:"model_type"`
		Architectures []string `json:"architectures"`
		TorchDtype    string   `json:"torch_dtype"`
	}
	readJSON(t, filepath.Join(dir, "config.json"), &cfg)
	if cfg.ModelType != "qwen3" || len(cfg.Architectures) != 1 || cfg.Architectures[0] != "Qwen3ForCausalLM" || cfg.TorchDtype != "bfloat16" {
		t.Errorf("config.json: %+v", cfg)
	}
	st, err := os.ReadFile(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	header := string(st[8 : 8+binary.LittleEndian.Uint64(st)])
	if !strings.Contains(header, `"model.layers.1.self_attn.k_proj.weight":{"dtype":"BF16","shape":[64,64]`) {
		t.Errorf("model.safetensors header lacks a bf16 (64, 64) k_proj of layer 1: %.300s", header)
	}
	var gen struct {
		BOS int   `json:"bos_token_id"`
		EOS []int `json:"eos_token_id"`
	}
	readJSON(t, filepath.Join(dir, "generation_config.json"), &gen)
	if gen.BOS != 151643 || len(gen.EOS) != 2 || gen.EOS[0] != 151645 || gen.EOS[1] != 151643 {
		t.Errorf("generation_config.json: %+v", gen)
	}
	wantTok, err := qwen3data.TokenizerJSON()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]byte{"tokenizer.json": wantTok, "tokenizer_config.json": qwen3data.TokenizerConfigJSON()} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes (%v), want the committed %d", name, len(got), err, len(want))
		}
	}
}

func readJSON(t *testing.T, path string, dst any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, dst); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
