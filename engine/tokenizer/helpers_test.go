package tokenizer

import (
	"fmt"
	"strings"
	"testing"
)

func mustDefault(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := Default()
	if err != nil {
		t.Fatalf("Default: %v", err)
	}
	return tok
}

// openAIEncoderJSON renders the vocabulary as OpenAI's GPT-2 encoder.json is
// written: Python's json.dumps defaults (ASCII only, ", " and ": ").
func openAIEncoderJSON(tok *Tokenizer) []byte {
	var b strings.Builder
	b.WriteByte('{')
	for id := 0; id < tok.VocabSize(); id++ {
		if id > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('"')
		for _, r := range tok.vocabText(int32(id)) {
			switch {
			case r == '"' || r == '\\':
				b.WriteByte('\\')
				b.WriteRune(r)
			case r < 0x20 || r > 0x7e:
				fmt.Fprintf(&b, `\u%04x`, r)
			default:
				b.WriteRune(r)
			}
		}
		fmt.Fprintf(&b, `": %d`, id)
	}
	b.WriteByte('}')
	return []byte(b.String())
}
