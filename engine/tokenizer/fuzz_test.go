package tokenizer

import (
	"testing"
	"unicode/utf8"
)

// FuzzEncodeDecode: Decode(Encode(s)) == s for valid UTF-8, and for any
// bytes it is s read the way encoding/json reads it; no input panics.
func FuzzEncodeDecode(f *testing.F) {
	for _, s := range []string{"", "Hello world", "I'm  ok\n\n", "<|endoftext|>x", "日本語 🤖", "\xff\xe2\x82", " 's'll"} {
		f.Add(s)
	}
	tok := mustDefault(f)
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s)
		want := s
		if !utf8.ValidString(s) {
			want = validInputText(s)
		}
		if got := tok.Decode(ids); got != want {
			t.Fatalf("Decode(Encode(%q)) = %q, want %q", s, got, want)
		}
		if got := streamDecode(t, tok, ids); got != want {
			t.Fatalf("stream of Encode(%q) = %q, want %q", s, got, want)
		}
	})
}
