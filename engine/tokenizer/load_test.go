package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var sampleTexts = []string{"Hello world", "I'm  fine\n\n  ok<|endoftext|>日本語 🤖", "x = 3.14;\t// done", "\xff bad"}

// gpt2TokenizerJSON renders the built-in vocabulary as an HF tokenizer.json,
// with merges as "a b" strings or as ["a", "b"] pairs.
func gpt2TokenizerJSON(t *testing.T, tok *Tokenizer, pairMerges bool) map[string]any {
	t.Helper()
	vocab := map[string]int{}
	for id := 0; id < tok.VocabSize(); id++ {
		vocab[tok.vocabText(int32(id))] = id
	}
	var merges []any
	for _, m := range tok.mergeList {
		left, right := tok.vocabText(m[0]), tok.vocabText(m[1])
		if pairMerges {
			merges = append(merges, []string{left, right})
		} else {
			merges = append(merges, left+" "+right)
		}
	}
	return map[string]any{
		"version": "1.0",
		"added_tokens": []any{map[string]any{"id": 50256, "content": "<|endoftext|>", "single_word": false,
			"lstrip": false, "rstrip": false, "normalized": true, "special": true}},
		"normalizer":     nil,
		"pre_tokenizer":  map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
		"post_processor": map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": "",
			"end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "vocab": vocab, "merges": merges},
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func assertSameEncoding(t *testing.T, got, want *Tokenizer) {
	t.Helper()
	if got.VocabSize() != want.VocabSize() || got.EOS() != want.EOS() {
		t.Fatalf("VocabSize/EOS %d/%d, want %d/%d", got.VocabSize(), got.EOS(), want.VocabSize(), want.EOS())
	}
	for _, s := range sampleTexts {
		if g, w := got.Encode(s), want.Encode(s); !slices.Equal(g, w) {
			t.Errorf("Encode(%q) = %v, want %v", s, g, w)
		}
	}
}

func TestLoadTokenizerJSON(t *testing.T) {
	builtin := mustDefault(t)
	for _, pairMerges := range []bool{false, true} {
		dir := t.TempDir()
		writeJSON(t, filepath.Join(dir, "tokenizer.json"), gpt2TokenizerJSON(t, builtin, pairMerges))
		tok, err := Load(dir)
		if err != nil {
			t.Fatalf("pair merges %v: %v", pairMerges, err)
		}
		assertSameEncoding(t, tok, builtin)
	}
}

// TestLoadRefusesOtherTokenizers: every setting that would make HF's ids
// differ from Encode's is an error naming it.
func TestLoadRefusesOtherTokenizers(t *testing.T) {
	builtin := mustDefault(t)
	tests := []struct {
		name    string
		edit    func(tj map[string]any)
		wantErr string
	}{
		{"normalizer", func(tj map[string]any) { tj["normalizer"] = map[string]any{"type": "NFKC"} }, "normalizer"},
		{"other split regex", func(tj map[string]any) {
			tj["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
				map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `\s+`}, "behavior": "Isolated"},
				map[string]any{"type": "ByteLevel", "use_regex": false},
			}}
		}, "pre_tokenizer"},
		{"other decoder", func(tj map[string]any) { tj["decoder"] = map[string]any{"type": "WordPiece"} }, "decoder"},
		{"prefix space", func(tj map[string]any) {
			tj["pre_tokenizer"].(map[string]any)["add_prefix_space"] = true
		}, "pre_tokenizer"},
		{"other pre-tokenizer", func(tj map[string]any) { tj["pre_tokenizer"] = map[string]any{"type": "Whitespace"} }, "pre_tokenizer"},
		{"no regex", func(tj map[string]any) { tj["pre_tokenizer"].(map[string]any)["use_regex"] = false }, "pre_tokenizer"},
		{"BOS template", func(tj map[string]any) {
			tj["post_processor"] = map[string]any{"type": "TemplateProcessing"}
		}, "post_processor"},
		{"WordPiece", func(tj map[string]any) { tj["model"].(map[string]any)["type"] = "WordPiece" }, "WordPiece"},
		{"dropout", func(tj map[string]any) { tj["model"].(map[string]any)["dropout"] = 0.1 }, "dropout"},
		{"subword prefix", func(tj map[string]any) { tj["model"].(map[string]any)["continuing_subword_prefix"] = "##" }, "prefix"},
		{"bad merges", func(tj map[string]any) { tj["model"].(map[string]any)["merges"] = []any{"a b c"} }, "merges"},
		{"merge of unknown token", func(tj map[string]any) { tj["model"].(map[string]any)["merges"] = []any{"a zzzz"} }, "not in the vocabulary"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tj := gpt2TokenizerJSON(t, builtin, false)
			tt.edit(tj)
			dir := t.TempDir()
			writeJSON(t, filepath.Join(dir, "tokenizer.json"), tj)
			_, err := Load(dir)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Load: error %v, want one mentioning %q", err, tt.wantErr)
			}
		})
	}
}

// TestLoadVocabAndMerges: a small byte-level BPE that is not GPT-2's, read
// from vocab.json + merges.txt, merges by rank rather than by id.
func TestLoadVocabAndMerges(t *testing.T) {
	vocab := map[string]int{}
	for i, b := range byteOrder {
		vocab[string(byteRune[b])] = i
	}
	vocab["ab"], vocab["abc"], vocab["Ġa"], vocab["<|end|>"] = 258, 257, 256, 259
	dir := t.TempDir()
	writeJSON(t, filepath.Join(dir, "vocab.json"), vocab)
	merges := "#version: 0.2\na b\nab c\nĠ a\n"
	if err := os.WriteFile(filepath.Join(dir, "merges.txt"), []byte(merges), 0o644); err != nil {
		t.Fatal(err)
	}
	writeJSON(t, filepath.Join(dir, "special_tokens_map.json"), map[string]any{"eos_token": map[string]any{"content": "<|end|>"}})
	tok, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	space := int32(vocab["Ġ"])
	tests := []struct {
		in   string
		want []int32
	}{
		{"abc", []int32{257}},
		{" ab", []int32{space, 258}}, // "a b" outranks "Ġ a"
		{" ac", []int32{256, int32(vocab["c"])}},
		{"ab<|end|>abc", []int32{258, 259, 257}},
	}
	for _, tt := range tests {
		if got := tok.Encode(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("Encode(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
	if tok.EOS() != 259 || tok.VocabSize() != 260 || tok.Decode([]int32{257, 259}) != "abc<|end|>" {
		t.Errorf("EOS %d VocabSize %d Decode %q", tok.EOS(), tok.VocabSize(), tok.Decode([]int32{257, 259}))
	}
	// It writes and loads back unchanged.
	again := t.TempDir()
	if err := tok.WriteFiles(again); err != nil {
		t.Fatal(err)
	}
	reloaded, err := Load(again)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		if got := reloaded.Encode(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("reloaded Encode(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	if _, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no tokenizer.json") {
		t.Errorf("Load(empty dir): error %v, want one saying no tokenizer.json", err)
	}
	builtin := mustDefault(t)
	tests := []struct {
		name    string
		edit    func(dir string) error
		wantErr string
	}{
		{"no vocab.json", func(dir string) error { return os.Remove(filepath.Join(dir, "vocab.json")) }, "vocab.json"},
		{"no merges", func(dir string) error { return os.Remove(filepath.Join(dir, "merges.txt")) }, "merges.txt"},
		{"bad merges line", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "merges.txt"), []byte("#version: 0.2\nĠ t x\n"), 0o644)
		}, "merges.txt:2"},
		{"vocab not JSON", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "vocab.json"), []byte("{"), 0o644)
		}, "vocab.json"},
		{"token outside the byte-level alphabet", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "vocab.json"), []byte(`{"!":0,"a b":1}`), 0o644)
		}, "byte-level alphabet"},
		{"missing byte token", func(dir string) error {
			if err := os.WriteFile(filepath.Join(dir, "merges.txt"), nil, 0o644); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, "vocab.json"), []byte(`{"!":0,"<|endoftext|>":1}`), 0o644)
		}, "no token for byte"},
		{"add_bos_token", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(`{"add_bos_token":true}`), 0o644)
		}, "add_bos_token"},
		{"unknown EOS", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "special_tokens_map.json"), []byte(`{"eos_token":"</s>"}`), 0o644)
		}, "EOS token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := builtin.WriteFiles(dir); err != nil {
				t.Fatal(err)
			}
			if err := tt.edit(dir); err != nil {
				t.Fatal(err)
			}
			_, err := Load(dir)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Load: error %v, want one mentioning %q", err, tt.wantErr)
			}
		})
	}
}
