package tokenizer

import (
	"slices"
	"testing"
)

func splitQwen2Pieces(s string) []string {
	var out []string
	for start := 0; start < len(s); {
		end := qwen2PieceEnd(s, start)
		out = append(out, s[start:end])
		start = end
	}
	return out
}

// TestQwen2Pieces spells out the alternatives of Qwen2's split regex; each
// row is worked by hand from the expression (leftmost alternative wins).
func TestQwen2Pieces(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"Hello world", []string{"Hello", " world"}},
		{"I'm don't they'll we've you're she'd it's", []string{"I", "'m", " don", "'t", " they", "'ll", " we", "'ve", " you", "'re", " she", "'d", " it", "'s"}},
		{"DON'T I'M WE'VE YOU'Re", []string{"DON", "'T", " I", "'M", " WE", "'VE", " YOU", "'Re"}}, // (?i:...)
		{"'sorry", []string{"'s", "orry"}},
		{"x'\u017ft", []string{"x", "'\u017f", "t"}},                         // long s folds to s                                   // the contraction is tried first
		{"'x 're", []string{"'x", " '", "re"}},                               // any non-letter may lead a word; " 're" is no contraction
		{"12345 678", []string{"1", "2", "3", "4", "5", " ", "6", "7", "8"}}, // digits one by one
		{"x1234", []string{"x", "1", "2", "3", "4"}},
		{"a  b", []string{"a", " ", " b"}},
		{"a\tb", []string{"a", "\tb"}}, // a tab leads a word
		{"a\t\tb", []string{"a", "\t", "\tb"}},
		{"a\nb", []string{"a", "\n", "b"}}, // a line break never leads a word
		{"a \n b", []string{"a", " \n", " b"}},
		{"a\r\n\r\nb", []string{"a", "\r\n\r\n", "b"}},
		{"a \n  \n  b", []string{"a", " \n  \n", " ", " b"}}, // \s*[\r\n]+ ends at the last line break
		{"a   ", []string{"a", "   "}},
		{"?!.. ok", []string{"?!..", " ok"}},
		{"!!abc", []string{"!!", "abc"}},
		{".Net", []string{".Net"}},
		{"x;\n\ny", []string{"x", ";\n\n", "y"}}, // symbols take the line breaks after them
		{" !x", []string{" !", "x"}},
		{"  !x", []string{" ", " !", "x"}},
		{" 1", []string{" ", "1"}},
		{"é\u0301x", []string{"é", "\u0301x"}}, // a combining mark is neither letter nor number
		{"日本 語", []string{"日本", " 語"}},
		{"\u00a0x", []string{"\u00a0x"}},
		{"😀😀 ok", []string{"😀😀", " ok"}},
		{"\x1c\x1d", []string{"\x1c\x1d"}},
		{"\n", []string{"\n"}},
		{" ", []string{" "}},
	}
	for _, tt := range tests {
		if got := splitQwen2Pieces(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("pieces(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
