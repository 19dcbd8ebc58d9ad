package tokenizer

import (
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
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

// FuzzQwen3EncodeDecode: the same for Qwen3's tokenizer on text that NFC
// leaves alone; every piece of the Qwen2 splitter is non-empty and in bounds;
// no input panics.
func FuzzQwen3EncodeDecode(f *testing.F) {
	for _, s := range []string{"", "Hello world", "I'M  ok\r\n\r\n", "<|im_start|>x<think>", "日本語 🤖 12345", "\xff\xe2\x82",
		" 's'LL", "cafe\u0301", "a \n  \n  b"} {
		f.Add(s)
	}
	tok := mustQwen3(f)
	f.Fuzz(func(t *testing.T, s string) {
		valid := validInputText(s)
		for start := 0; start < len(valid); {
			end := qwen2PieceEnd(valid, start)
			if end <= start || end > len(valid) {
				t.Fatalf("qwen2PieceEnd(%q, %d) = %d", valid, start, end)
			}
			start = end
		}
		ids := tok.Encode(s)
		if !norm.NFC.IsNormalString(valid) {
			return
		}
		if got := tok.Decode(ids); got != valid {
			t.Fatalf("Decode(Encode(%q)) = %q, want %q", s, got, valid)
		}
		if got := streamDecode(t, tok, ids); got != valid {
			t.Fatalf("stream of Encode(%q) = %q, want %q", s, got, valid)
		}
	})
}
