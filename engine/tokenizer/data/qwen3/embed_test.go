package qwen3data

import (
	"encoding/json"
	"testing"
)

func TestFilesDecode(t *testing.T) {
	b, err := TokenizerJSON()
	if err != nil {
		t.Fatal(err)
	}
	var tj struct {
		Model struct {
			Type  string         `json:"type"`
			Vocab map[string]int `json:"vocab"`
		} `json:"model"`
	}
	if err := json.Unmarshal(b, &tj); err != nil {
		t.Fatalf("tokenizer.json: %v", err)
	}
	if tj.Model.Type != "BPE" || len(tj.Model.Vocab) != 151643 {
		t.Fatalf("model type %q with %d vocab entries, want BPE with 151643", tj.Model.Type, len(tj.Model.Vocab))
	}
	var cfg map[string]any
	if err := json.Unmarshal(TokenizerConfigJSON(), &cfg); err != nil {
		t.Fatalf("tokenizer_config.json: %v", err)
	}
}
