package tokenizer

import (
	"strings"
	"testing"
)

// benchTexts: English prose, source code, and the mixed-script corpus.
func benchTexts(b *testing.B) map[string]string {
	b.Helper()
	prose := strings.Repeat("It was the best of times, it was the worst of times, it was the age of wisdom, "+
		"it was the age of foolishness; we had everything before us, we had nothing before us.\n", 200)
	code := strings.Repeat("func (t *Tokenizer) Encode(text string) []int32 {\n\tids := make([]int32, 0, len(text)/3+1)\n"+
		"\tfor i := 0; i < len(text); i++ { ids = append(ids, int32(text[i])) }\n\treturn ids\n}\n\n", 200)
	var mixed strings.Builder
	for _, e := range readCorpus(b) {
		if e.Text != nil {
			mixed.WriteString(*e.Text)
			mixed.WriteByte('\n')
		}
	}
	return map[string]string{"prose": prose, "code": code, "corpus": strings.Repeat(mixed.String(), 4)}
}

func BenchmarkEncode(b *testing.B) {
	tok := mustDefault(b)
	for name, text := range benchTexts(b) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				tok.Encode(text)
			}
		})
	}
}

// BenchmarkEncodeQwen3 runs the Qwen3 tokenizer on BenchmarkEncode's texts,
// so the two read side by side.
func BenchmarkEncodeQwen3(b *testing.B) {
	tok := mustQwen3(b)
	for name, text := range benchTexts(b) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				tok.Encode(text)
			}
		})
	}
}

// BenchmarkLoadQwen3 is the server-start cost of the Qwen3 tokenizer: the
// built-in one (gunzip and parse the 11 MB tokenizer.json, build the
// vocabulary and merge table) and Load of a model directory (--model DIR).
func BenchmarkLoadQwen3(b *testing.B) {
	b.Run("builtin", func(b *testing.B) {
		for b.Loop() {
			if _, err := buildQwen3(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("dir", func(b *testing.B) {
		dir := b.TempDir()
		if err := mustQwen3(b).WriteFiles(dir); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := Load(dir); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkDetokenizerAdd(b *testing.B) {
	tok := mustDefault(b)
	ids := tok.Encode(benchTexts(b)["corpus"])
	b.ResetTimer()
	d := tok.NewDetokenizer()
	for i := 0; b.Loop(); i++ {
		d.Add(ids[i%len(ids)])
	}
}

func BenchmarkDefault(b *testing.B) {
	for b.Loop() {
		if _, err := buildGPT2(); err != nil {
			b.Fatal(err)
		}
	}
}
