package tokenizer

import (
	"slices"
	"testing"
)

func splitPieces(s string) []string {
	var out []string
	for start := 0; start < len(s); {
		end := pieceEnd(s, start)
		out = append(out, s[start:end])
		start = end
	}
	return out
}

// TestPieces spells out the alternatives of GPT-2's pre-tokenizer regex.
func TestPieces(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"Hello world", []string{"Hello", " world"}},
		{"I'm don't they'll we've you're she'd it's", []string{"I", "'m", " don", "'t", " they", "'ll", " we", "'ve", " you", "'re", " she", "'d", " it", "'s"}},
		{"DON'T", []string{"DON", "'", "T"}}, // contractions are lower case only
		{"'x 're", []string{"'", "x", " '", "re"}},
		{"a  b", []string{"a", " ", " b"}},     // the last space of a run joins the word
		{"a \n b", []string{"a", " \n", " b"}}, // mixed whitespace run
		{"a\nb", []string{"a", "\n", "b"}},     // a lone non-space whitespace stands alone
		{"a   ", []string{"a", "   "}},         // a run at the end stays whole
		{"x1234 56", []string{"x", "1234", " 56"}},
		{"?!.. ok", []string{"?!..", " ok"}},
		{" !x", []string{" !", "x"}},
		{"é\u0301x", []string{"é", "\u0301", "x"}}, // a combining mark is neither letter nor number
		{"日本 語", []string{"日本", " 語"}},
		{"\u00a0x", []string{"\u00a0", "x"}}, // NBSP is \s but not the optional ' '
		{"\x1c\x1d", []string{"\x1c\x1d"}},   // file separators are not White_Space
	}
	for _, tt := range tests {
		if got := splitPieces(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("pieces(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
