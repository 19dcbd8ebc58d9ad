package workload

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/engine/tokenizer"
	"github.com/roseinfer/roseinfer/harness/workload/workloadtest"
)

// qwen3VocabSize is the Qwen3 tokenizer's (151,643 regular tokens and 26
// added ones); the model's embedding pads on to 151,936.
const qwen3VocabSize = 151669

// A workload for a qwen3-tiny directory draws every prompt id, the warmup's
// too, from the tokenizer's regular tokens (never an added or special one)
// and clamps to the 2,048 positions of its config.json; both prefix modes.
func TestLoadQwen3Dir(t *testing.T) {
	dir := t.TempDir()
	if err := workloadtest.Qwen3Tiny(dir); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	var lines []string
	for i := range 20 {
		lines = append(lines, `{"timestamp": `+itoa(i*100)+`, "input_length": 3000, "output_length": 40, "hash_ids": [`+itoa(i%3)+`, 7, 8, 9, 10, 11]}`)
	}
	if err := os.WriteFile(trace, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"base", "trace"} {
		o := &Options{TracePath: trace, N: 20, PromptOverheadTokens: 8, ModelDir: dir, PrefixMode: mode, Seed: 42,
			WarmupInputLen: 128, WarmupOutputLen: 32}
		w, err := Load(o)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if got := w.Context().ModelMaxLen; got != 2048 {
			t.Errorf("%s: clamp context %d, want qwen3-tiny's 2048", mode, got)
		}
		seen := map[int32]bool{}
		for i, p := range append(w.Prompts(), w.warmup) {
			if i < w.NumRows() && len(p)+w.rows[i].OutputLen > w.Context().Effective() {
				t.Errorf("%s: row %d: %d + %d tokens exceed the effective context %d", mode, i, len(p), w.rows[i].OutputLen, w.Context().Effective())
			}
			for _, id := range p {
				if id < 0 || id >= qwen3VocabSize || tok.IsSpecial(id) || id >= 151643 {
					t.Fatalf("%s: prompt %d holds id %d: outside the regular tokens", mode, i, id)
				}
				seen[id] = true
			}
		}
		if len(seen) < 1000 {
			t.Errorf("%s: only %d distinct ids", mode, len(seen))
		}
		// The ids past GPT-2's half-vocabulary show the draw spans Qwen3's.
		top := int32(0)
		for id := range seen {
			top = max(top, id)
		}
		if top < 50257 {
			t.Errorf("%s: largest id %d: drawn from GPT-2's range", mode, top)
		}
	}
}

// The model's regular tokens leave out every added token, special or not.
func TestReadModelQwen3TokenIDs(t *testing.T) {
	dir := t.TempDir()
	if err := workloadtest.Qwen3Tiny(dir); err != nil {
		t.Fatal(err)
	}
	m, err := ReadModel(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Family != "qwen3" || m.ContextLen != 2048 {
		t.Errorf("family %q, context %d; want qwen3, 2048", m.Family, m.ContextLen)
	}
	if len(m.TokenIDs) != 151643 || m.TokenIDs[0] != 0 || m.TokenIDs[len(m.TokenIDs)-1] != 151642 {
		t.Errorf("%d regular ids (%d..%d), want 151643 (0..151642)", len(m.TokenIDs), m.TokenIDs[0], m.TokenIDs[len(m.TokenIDs)-1])
	}
	if _, err := ReadModel(t.TempDir()); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("a directory without config.json: %v, want an error naming it", err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
