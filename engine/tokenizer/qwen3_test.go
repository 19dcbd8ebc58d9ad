package tokenizer

import (
	"slices"
	"testing"
	"unicode/utf8"
)

func mustQwen3(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := Qwen3()
	if err != nil {
		t.Fatalf("Qwen3: %v", err)
	}
	return tok
}

// idOfText returns the id of the token whose bytes are text, by a scan of the
// vocabulary: the test's own reading of tokenizer.json, not Encode's.
func idOfText(t *testing.T, tok *Tokenizer, text string) int32 {
	t.Helper()
	for id := range tok.VocabSize() {
		if tok.tokenBytes(int32(id)) == text && !tok.IsSpecial(int32(id)) {
			return int32(id)
		}
	}
	t.Fatalf("no token %q", text)
	return -1
}

func TestQwen3Vocabulary(t *testing.T) {
	tok := mustQwen3(t)
	if tok.VocabSize() != 151669 {
		t.Errorf("VocabSize = %d, want 151669 (151643 BPE + 26 added)", tok.VocabSize())
	}
	if tok.EOS() != 151645 {
		t.Errorf("EOS = %d, want 151645 (<|im_end|>, tokenizer_config.json's eos_token)", tok.EOS())
	}
	for _, c := range []struct {
		id      int32
		text    string
		special bool
	}{
		{151643, "<|endoftext|>", true}, {151644, "<|im_start|>", true}, {151645, "<|im_end|>", true},
		{151657, "<tool_call>", false}, {151667, "<think>", false}, {151668, "</think>", false},
	} {
		if got := string(tok.TokenBytes(c.id)); got != c.text || tok.IsSpecial(c.id) != c.special {
			t.Errorf("token %d = %q special %v, want %q special %v", c.id, got, tok.IsSpecial(c.id), c.text, c.special)
		}
	}
}

// TestQwen3EncodeByHand: ids worked out from the vocabulary (single tokens
// that the test looks up itself) and the split rules.
func TestQwen3EncodeByHand(t *testing.T) {
	tok := mustQwen3(t)
	id := func(s string) int32 { return idOfText(t, tok, s) }
	tests := []struct {
		in   string
		want []int32
	}{
		{"Hello", []int32{id("Hello")}},
		{"Hello world", []int32{id("Hello"), id(" world")}},
		// Digits are split one by one, and a space before a digit stands alone.
		{"2026 12", []int32{id("2"), id("0"), id("2"), id("6"), id(" "), id("1"), id("2")}},
		// Added tokens, special or not, are matched before splitting.
		{"<|im_start|>user\nhi<|im_end|>", []int32{151644, id("user"), id("\n"), id("hi"), 151645}},
		{"<think>\n\n</think>\n\n", []int32{151667, id("\n\n"), 151668, id("\n\n")}},
		{"a<|endoftext|>", []int32{id("a"), 151643}},
	}
	for _, tt := range tests {
		if got := tok.Encode(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("Encode(%q) = %v, want %v", tt.in, got, tt.want)
		}
		if got := tok.Decode(tok.Encode(tt.in)); got != tt.in {
			t.Errorf("Decode(Encode(%q)) = %q", tt.in, got)
		}
	}
}

// TestQwen3UnclosedSpecial: text that only begins like an added token is
// ordinary text, with no added id.
func TestQwen3UnclosedSpecial(t *testing.T) {
	tok := mustQwen3(t)
	for _, in := range []string{"<|im_start", "<|im_end |>", "<think", "< think>"} {
		ids := tok.Encode(in)
		for _, id := range ids {
			if id >= 151643 {
				t.Errorf("Encode(%q) = %v: has added id %d", in, ids, id)
			}
		}
		if got := tok.Decode(ids); got != in {
			t.Errorf("Decode(Encode(%q)) = %q", in, got)
		}
	}
}

// TestQwen3NFC: text is NFC-normalized before splitting (the normalizer of
// tokenizer.json), so e + combining acute encodes as é.
func TestQwen3NFC(t *testing.T) {
	tok := mustQwen3(t)
	if got, want := tok.Encode("cafe\u0301"), tok.Encode("café"); !slices.Equal(got, want) {
		t.Errorf("Encode(decomposed) = %v, want %v (NFC)", got, want)
	}
}

// TestQwen3InvalidUTF8: invalid bytes are read as U+FFFD, as a JSON request
// body would be, and every byte has a token.
func TestQwen3InvalidUTF8(t *testing.T) {
	tok := mustQwen3(t)
	got := tok.Decode(tok.Encode("a\xffb"))
	if got != "a\uFFFDb" {
		t.Errorf("round trip of invalid UTF-8 = %q, want %q", got, "a\uFFFDb")
	}
	// A token that is half a character decodes to U+FFFD alone and whole with its other half.
	ids := tok.Encode("\U0001F9EC\U0001F9EC") // 🧬🧬: rare enough to be split inside a character
	var partial bool
	for _, id := range ids {
		partial = partial || !utf8.Valid(tok.TokenBytes(id))
	}
	if !partial {
		t.Fatalf("Encode(🧬🧬) = %v: every token is whole; the test needs a rarer character", ids)
	}
	if got := tok.Decode(ids); got != "\U0001F9EC\U0001F9EC" {
		t.Errorf("Decode = %q", got)
	}
}

// TestQwen3WriteFiles: the built-in Qwen3 tokenizer writes its own HF files,
// and Load reads them back to the same tokenizer.
func TestQwen3WriteFiles(t *testing.T) {
	tok := mustQwen3(t)
	dir := t.TempDir()
	if err := tok.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	back, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	text := "<|im_start|>user\nIt'S 2026 — café 日本語 🧬<|im_end|>"
	if back.VocabSize() != tok.VocabSize() || back.EOS() != tok.EOS() || !slices.Equal(back.Encode(text), tok.Encode(text)) {
		t.Errorf("Load(WriteFiles) differs: %d tokens, EOS %d, %v", back.VocabSize(), back.EOS(), back.Encode(text))
	}
	// A Qwen2-pipeline tokenizer not built in cannot be written in GPT-2's layout.
	back.sourceFiles = nil
	if err := back.WriteFiles(t.TempDir()); err == nil {
		t.Error("WriteFiles of a Qwen2-pipeline tokenizer without source files: no error")
	}
}

func TestQwen3DecodeSkipSpecial(t *testing.T) {
	tok := mustQwen3(t)
	ids := tok.Encode("<|im_start|>assistant\n<think>\nok\n</think>\n\nHi!<|im_end|><|endoftext|>")
	if got, want := tok.DecodeSkipSpecial(ids), "assistant\n<think>\nok\n</think>\n\nHi!"; got != want {
		t.Errorf("DecodeSkipSpecial = %q, want %q", got, want)
	}
}
