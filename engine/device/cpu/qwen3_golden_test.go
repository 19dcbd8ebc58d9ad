// The fixture this test reads is made on a machine with transformers by
// engine/model/testdata/make_golden_qwen3.py (its header has the commands).

package cpu

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/roseinfer/roseinfer/engine/model"
)

// The Qwen3 golden fixture comes from Hugging Face transformers'
// Qwen3ForCausalLM (fp32) on the checkpoint `roseinfer init-model --preset
// qwen3-tiny --seed 1 --dtype fp32` writes; make_golden_qwen3.py (in
// goldenDir) says how it is made.
const (
	qwen3PromptsFile = "qwen3_golden_prompts.json"
	qwen3IndexFile   = "qwen3_golden.json"
	qwen3LogitsFile  = "qwen3_golden_logits.bin"
)

type qwen3GoldenPrompts struct {
	Preset       string `json:"preset"`
	Seed         uint64 `json:"seed"`
	GreedyTokens int    `json:"greedy_tokens"`
	Prompts      []struct {
		Name           string  `json:"name"`
		IDs            []int32 `json:"ids"`
		LogitPositions []int   `json:"logit_positions"`
	} `json:"prompts"`
}

type qwen3GoldenIndex struct {
	Rows []struct {
		Prompt   string `json:"prompt"`
		Position int    `json:"position"`
		Offset   int    `json:"offset"`
		Length   int    `json:"length"`
	} `json:"rows"`
	Preset   string             `json:"preset"`
	Seed     uint64             `json:"seed"`
	Greedy   map[string][]int32 `json:"greedy"`
	Versions map[string]string  `json:"versions"`
	Errors   []string           `json:"errors"`
}

func readQwen3Golden(t *testing.T) (qwen3GoldenPrompts, qwen3GoldenIndex, []float32) {
	t.Helper()
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join(goldenDir, name))
		if errors.Is(err, fs.ErrNotExist) && name != qwen3PromptsFile {
			t.Fatalf("the Qwen3 golden fixture is missing (%s): make it with HF transformers as "+
				"engine/model/testdata/make_golden_qwen3.py's doc says, and commit %s and %s", name, qwen3IndexFile, qwen3LogitsFile)
		}
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	var spec qwen3GoldenPrompts
	var index qwen3GoldenIndex
	if err := json.Unmarshal(read(qwen3PromptsFile), &spec); err != nil {
		t.Fatalf("%s: %v", qwen3PromptsFile, err)
	}
	if err := json.Unmarshal(read(qwen3IndexFile), &index); err != nil {
		t.Fatalf("%s: %v", qwen3IndexFile, err)
	}
	if len(index.Errors) > 0 {
		t.Fatalf("the fixture records errors: %v", index.Errors)
	}
	if index.Preset != spec.Preset || index.Seed != spec.Seed {
		t.Fatalf("the fixture is of preset %q seed %d, the prompts file asks for %q seed %d: remake it",
			index.Preset, index.Seed, spec.Preset, spec.Seed)
	}
	raw := read(qwen3LogitsFile)
	floats := make([]float32, len(raw)/4)
	for i := range floats {
		floats[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return spec, index, floats
}

// TestQwen3GoldenLogits regenerates the fixture's model in memory from
// (preset, seed), feeds each prompt through the real device with a paged
// cache in chunks that end at the recorded positions (so later chunks read
// earlier ones from the cache), compares the logits with transformers',
// then decodes greedily step by step and compares the continuation.
func TestQwen3GoldenLogits(t *testing.T) {
	spec, index, floats := readQwen3Golden(t)
	t.Logf("reference: %v", index.Versions)
	cfg, err := model.Preset(spec.Preset)
	if err != nil {
		t.Fatal(err)
	}
	w, err := model.InitRandom(cfg, spec.Seed)
	if err != nil {
		t.Fatal(err)
	}
	d := newTestDevice(t, w, 1, Options{})
	worst, checked := 0.0, 0
	for _, p := range spec.Prompts {
		stops := slices.Clone(p.LogitPositions)
		if last := len(p.IDs) - 1; !slices.Contains(stops, last) {
			stops = append(stops, last)
		}
		slices.Sort(stops)
		rows, tokens := runSingle(t, d, blockTable(cfg, 0, 1), p.IDs, stops, spec.GreedyTokens)
		for _, r := range index.Rows {
			if r.Prompt != p.Name {
				continue
			}
			got := rows[slices.Index(stops, r.Position)]
			if len(got) != r.Length || r.Offset+r.Length > len(floats) {
				t.Fatalf("%s@%d: %d logits, fixture row has %d at %d of %d", p.Name, r.Position, len(got), r.Length, r.Offset, len(floats))
			}
			rel := relError(got, floats[r.Offset:r.Offset+r.Length])
			t.Logf("%-9s position %3d: max relative error %.2e", p.Name, r.Position, rel)
			if rel > goldenTolerance {
				t.Errorf("%s@%d: relative error %.2e > %.0e", p.Name, r.Position, rel, goldenTolerance)
			}
			worst = math.Max(worst, rel)
			checked++
		}
		if want := index.Greedy[p.Name]; len(want) != spec.GreedyTokens || !slices.Equal(tokens, want) {
			t.Errorf("%s greedy continuation:\n got %v\nwant %v", p.Name, tokens, want)
		}
	}
	if checked != len(index.Rows) || checked == 0 {
		t.Errorf("checked %d of the fixture's %d rows", checked, len(index.Rows))
	}
	t.Logf("worst max relative error over %d rows: %.2e", checked, worst)
}
