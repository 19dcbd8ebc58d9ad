package model

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var goldenDir = flag.String("golden-dir", "", "write the golden checkpoints of testdata/golden_prompts.json into this directory for testdata/make_golden.py")

// goldenSpec is testdata/golden_prompts.json: the models and prompts of the
// golden reference (engine/device/cpu reads it too).
type goldenSpec struct {
	GreedyTokens int           `json:"greedy_tokens"`
	Models       []goldenModel `json:"models"`
}

// goldenModel is one model of the golden reference: a preset or an HF config,
// and the InitRandom seed.
type goldenModel struct {
	Name    string          `json:"name"`
	Preset  string          `json:"preset"`
	Config  json.RawMessage `json:"config"`
	Seed    uint64          `json:"seed"`
	Prompts []struct {
		Name           string  `json:"name"`
		IDs            []int32 `json:"ids"`
		LogitPositions []int   `json:"logit_positions"`
	} `json:"prompts"`
	DTypeChecks *struct {
		Prompt   string `json:"prompt"`
		Position int    `json:"position"`
	} `json:"dtype_checks"`
}

// ModelConfig resolves the preset or the HF config.
func (g goldenModel) ModelConfig() (Config, error) {
	if g.Preset != "" {
		return Preset(g.Preset)
	}
	return ParseConfig(g.Config)
}

// TestWriteGoldenCheckpoints writes the checkpoints that
// testdata/make_golden.py feeds to transformers; it runs only with
// -golden-dir (see the script's docstring for the whole procedure).
func TestWriteGoldenCheckpoints(t *testing.T) {
	if *goldenDir == "" {
		t.Skip("set -golden-dir to write the golden checkpoints")
	}
	data, err := os.ReadFile(filepath.Join("testdata", "golden_prompts.json"))
	if err != nil {
		t.Fatal(err)
	}
	var spec goldenSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	for _, gm := range spec.Models {
		cfg, err := gm.ModelConfig()
		if err != nil {
			t.Fatal(err)
		}
		w, err := InitRandom(cfg, gm.Seed)
		if err != nil {
			t.Fatal(err)
		}
		dtypes := []DType{FP32}
		if gm.DTypeChecks != nil {
			dtypes = append(dtypes, FP16, BF16)
		}
		for _, dt := range dtypes {
			dir := filepath.Join(*goldenDir, gm.Name+"-"+dt.String())
			if err := WriteCheckpoint(dir, cfg, w, dt); err != nil {
				t.Fatal(err)
			}
			t.Logf("wrote %s", dir)
		}
	}
}
