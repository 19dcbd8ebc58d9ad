package tokenizer

import (
	"strings"
	"testing"
)

func TestDetokenizer(t *testing.T) {
	tok := mustDefault(t)
	b := func(c byte) int32 { return tok.byteID[c] } // the one-byte token of c
	tests := []struct {
		name   string
		ids    []int32
		pieces []string // what each Add returns
		flush  string
	}{
		{"whole tokens pass through", []int32{15496, 995}, []string{"Hello", " world"}, ""},
		{"é split into its two bytes", []int32{b(0xC3), b(0xA9)}, []string{"", "é"}, ""},
		// 12520 is " \xF0\x9F": its space is complete text at once.
		{"emoji across three tokens", []int32{12520, 97, 244}, []string{" ", "", "🤖"}, ""},
		{"emoji then text", []int32{12520, 97, 244, 995}, []string{" ", "", "🤖", " world"}, ""},
		{"truncated emoji flushed as one U+FFFD", []int32{12520, 97}, []string{" ", ""}, "\uFFFD"},
		{"lone lead byte flushed", []int32{b(0xE3)}, []string{""}, "\uFFFD"},
		{"invalid byte emitted at once", []int32{b(0xFF), 995}, []string{"\uFFFD", " world"}, ""},
		{"continuation without lead", []int32{97, 244}, []string{"\uFFFD", "\uFFFD"}, ""},
		{"lead broken by next token", []int32{b(0xE2), 15496}, []string{"", "\uFFFDHello"}, ""},
		{"truncated 3-byte char then ASCII", []int32{b(0xE2), b(0x82), b('A')}, []string{"", "", "\uFFFDA"}, ""},
		{"EOS is its text", []int32{50256}, []string{"<|endoftext|>"}, ""},
		{"unknown ids add nothing", []int32{-1, 50257, 1 << 30}, []string{"", "", ""}, ""},
		{"unknown id keeps pending bytes", []int32{b(0xC3), 99999, b(0xA9)}, []string{"", "", "é"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tok.NewDetokenizer()
			for i, id := range tt.ids {
				if got := d.Add(id); got != tt.pieces[i] {
					t.Errorf("Add(%d) #%d = %q, want %q", id, i, got, tt.pieces[i])
				}
			}
			if got := d.Flush(); got != tt.flush {
				t.Errorf("Flush = %q, want %q", got, tt.flush)
			}
			if want := strings.Join(tt.pieces, "") + tt.flush; tok.Decode(tt.ids) != want {
				t.Errorf("Decode = %q, stream gave %q", tok.Decode(tt.ids), want)
			}
			if got := d.Flush(); got != "" {
				t.Errorf("second Flush = %q, want empty", got)
			}
			if got := d.Add(15496); got != "Hello" {
				t.Errorf("Add after Flush = %q, want %q", got, "Hello")
			}
		})
	}
}

// TestDetokenizerAllocs pins the server's per-token cost: a token that is
// whole text allocates nothing.
func TestDetokenizerAllocs(t *testing.T) {
	tok := mustDefault(t)
	d := tok.NewDetokenizer()
	ids := tok.Encode("The quick brown fox jumps over the lazy dog, 日本語.")
	allocs := testing.AllocsPerRun(100, func() {
		for _, id := range ids[:9] { // "The quick ... dog,": whole-text tokens
			d.Add(id)
		}
	})
	if allocs != 0 {
		t.Errorf("Add allocated %.1f times per run of whole-text tokens, want 0", allocs)
	}
}
