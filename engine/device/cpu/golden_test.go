package cpu

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/roseinfer/roseinfer/engine/model"
)

// The golden fixture comes from Hugging Face transformers' GPT2LMHeadModel
// (fp32) on checkpoints that model.WriteCheckpoint wrote from
// model.InitRandom; engine/model/testdata/make_golden.py says how.
const goldenDir = "../../model/testdata"

// goldenTolerance is the acceptance bound on max|ours - HF| / max|HF| per
// logits row.
const goldenTolerance = 1e-4

type goldenPrompts struct {
	GreedyTokens int `json:"greedy_tokens"`
	Models       []struct {
		Name    string          `json:"name"`
		Preset  string          `json:"preset"`
		Config  json.RawMessage `json:"config"`
		Seed    uint64          `json:"seed"`
		Prompts []struct {
			Name           string  `json:"name"`
			IDs            []int32 `json:"ids"`
			LogitPositions []int   `json:"logit_positions"`
		} `json:"prompts"`
	} `json:"models"`
}

type goldenIndex struct {
	Rows []struct {
		Model      string `json:"model"`
		Checkpoint string `json:"checkpoint"`
		Prompt     string `json:"prompt"`
		Position   int    `json:"position"`
		Offset     int    `json:"offset"`
		Length     int    `json:"length"`
	} `json:"rows"`
	Greedy   map[string]map[string][]int32 `json:"greedy"`
	Versions map[string]string             `json:"versions"`
	Errors   []string                      `json:"errors"`
}

func readGolden(t *testing.T) (goldenPrompts, goldenIndex, []float32) {
	t.Helper()
	var spec goldenPrompts
	var index goldenIndex
	for name, dst := range map[string]any{"golden_prompts.json": &spec, "golden.json": &index} {
		data, err := os.ReadFile(filepath.Join(goldenDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, dst); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if len(index.Errors) > 0 {
		t.Fatalf("the fixture records errors: %v", index.Errors)
	}
	raw, err := os.ReadFile(filepath.Join(goldenDir, "golden_logits.bin"))
	if err != nil {
		t.Fatal(err)
	}
	floats := make([]float32, len(raw)/4)
	for i := range floats {
		floats[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return spec, index, floats
}

// relError is max|got - want| / max|want|.
func relError(got, want []float32) float64 {
	maxDiff, maxRef := 0.0, 0.0
	for i := range want {
		maxDiff = math.Max(maxDiff, math.Abs(float64(got[i])-float64(want[i])))
		maxRef = math.Max(maxRef, math.Abs(float64(want[i])))
	}
	return maxDiff / maxRef
}

// TestGoldenLogits regenerates each fixture model in memory from (config,
// seed), feeds each prompt in chunks that end at the recorded positions (so
// later chunks read earlier ones from the paged cache), compares the logits
// with transformers', then decodes greedily and compares the continuation.
// fp16/bf16 rows check the checkpoint writer against transformers' reader.
func TestGoldenLogits(t *testing.T) {
	spec, index, floats := readGolden(t)
	t.Logf("reference: %v", index.Versions)
	worst := 0.0
	checked := 0
	for _, gm := range spec.Models {
		cfg, err := model.Preset(gm.Preset)
		if gm.Preset == "" {
			cfg, err = model.ParseConfig(gm.Config)
		}
		if err != nil {
			t.Fatal(err)
		}
		w, err := model.InitRandom(cfg, gm.Seed)
		if err != nil {
			t.Fatal(err)
		}
		devices := map[string]*Device{"fp32": newTestDevice(t, w, 1, Options{})}
		for _, dt := range []model.DType{model.FP16, model.BF16} {
			dir := filepath.Join(t.TempDir(), dt.String())
			if err := model.WriteCheckpoint(dir, cfg, w, dt); err != nil {
				t.Fatal(err)
			}
			wdt, err := model.LoadCheckpoint(dir)
			if err != nil {
				t.Fatal(err)
			}
			devices[dt.String()] = newTestDevice(t, wdt, 1, Options{})
		}
		for _, p := range gm.Prompts {
			// Chunk ends: every recorded position, then the prompt's end.
			stops := slices.Clone(p.LogitPositions)
			if last := len(p.IDs) - 1; !slices.Contains(stops, last) {
				stops = append(stops, last)
			}
			slices.Sort(stops)
			for ckpt, d := range devices {
				numDecode := 0
				if ckpt == "fp32" {
					numDecode = spec.GreedyTokens
				}
				rows, tokens := runSingle(t, d, blockTable(cfg, 0, 1), p.IDs, stops, numDecode)
				for _, r := range index.Rows {
					if r.Model != gm.Name || r.Prompt != p.Name || r.Checkpoint != ckpt {
						continue
					}
					got := rows[slices.Index(stops, r.Position)]
					if len(got) != r.Length {
						t.Fatalf("%s/%s/%s@%d: %d logits, fixture has %d", gm.Name, ckpt, p.Name, r.Position, len(got), r.Length)
					}
					rel := relError(got, floats[r.Offset:r.Offset+r.Length])
					t.Logf("%s %s %-6s position %4d: max relative error %.2e", gm.Name, ckpt, p.Name, r.Position, rel)
					if rel > goldenTolerance {
						t.Errorf("%s/%s/%s@%d: relative error %.2e > %.0e", gm.Name, ckpt, p.Name, r.Position, rel, goldenTolerance)
					}
					worst = math.Max(worst, rel)
					checked++
				}
				if ckpt != "fp32" {
					continue
				}
				want := index.Greedy[gm.Name][p.Name]
				if len(want) != spec.GreedyTokens || !slices.Equal(tokens, want) {
					t.Errorf("%s/%s greedy continuation:\n got %v\nwant %v", gm.Name, p.Name, tokens, want)
				}
			}
		}
	}
	if checked != len(index.Rows) {
		t.Errorf("checked %d of the fixture's %d rows", checked, len(index.Rows))
	}
	t.Logf("worst max relative error over %d rows: %.2e", checked, worst)
}
