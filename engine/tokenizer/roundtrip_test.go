package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// randomText draws runes from ranges the pre-tokenizer treats differently.
func randomText(rng *rand.Rand, maxRunes int) string {
	ranges := [][2]rune{
		{' ', '~'}, {'\t', '\r'}, {0x00, 0x1F}, {0x80, 0x2FF}, {0x300, 0x36F}, {0x370, 0x6FF},
		{0x900, 0x97F}, {0x2000, 0x206F}, {0x3000, 0x30FF}, {0x4E00, 0x4FFF}, {0xAC00, 0xAD00},
		{0xFF00, 0xFFEF}, {0x1F300, 0x1F6FF}, {0x10000, 0x10FFFF},
	}
	var b strings.Builder
	for n := rng.IntN(maxRunes + 1); n > 0; n-- {
		switch rng.IntN(10) {
		case 0:
			b.WriteString(gpt2EndOfText)
			continue
		case 1:
			b.WriteString([]string{"'s", "'ll", " ", "  ", "\n\n", " 's"}[rng.IntN(6)])
			continue
		}
		rg := ranges[rng.IntN(len(ranges))]
		r := rg[0] + rng.Int32N(rg[1]-rg[0]+1)
		if utf8.ValidRune(r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestRoundTrip: decoding the ids of any valid text gives the text back, the
// streamed pieces join to the same, and all ids are in the vocabulary.
func TestRoundTrip(t *testing.T) {
	tok := mustDefault(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 3000; i++ {
		s := randomText(rng, 40)
		ids := tok.Encode(s)
		if got := tok.Decode(ids); got != s {
			t.Fatalf("Decode(Encode(%q)) = %q (ids %v)", s, got, ids)
		}
		if got := streamDecode(t, tok, ids); got != s {
			t.Fatalf("stream of Encode(%q) = %q", s, got)
		}
		for _, id := range ids {
			if id < 0 || int(id) >= tok.VocabSize() {
				t.Fatalf("Encode(%q) gave id %d outside the vocabulary", s, id)
			}
		}
	}
}

// TestHeapMatchesArrayMerge runs both BPE paths on the same pieces; the
// corpus only reaches the heap through pieces over longPieceBytes.
func TestHeapMatchesArrayMerge(t *testing.T) {
	tok := mustDefault(t)
	rng := rand.New(rand.NewPCG(5, 6))
	words := []string{"a", "ab", "the", "ing", "é", "🤖", "!", "1", "aaa", "zz"}
	var sc bpeScratch
	for i := 0; i < 3000; i++ {
		var b strings.Builder
		for n := 1 + rng.IntN(30); n > 0; n-- {
			b.WriteString(words[rng.IntN(len(words))])
		}
		piece := b.String()
		if len(piece) < 2 {
			continue
		}
		array := tok.appendPieceIDs(nil, piece[:min(len(piece), longPieceBytes)], &sc)
		heap := tok.appendPieceIDsHeap(nil, piece[:min(len(piece), longPieceBytes)], &sc)
		if !slices.Equal(array, heap) {
			t.Fatalf("piece %q: array merge %v, heap merge %v", piece, array, heap)
		}
	}
}

// TestInvalidInputReadAsJSON: raw invalid bytes encode like the text a JSON
// request body would carry.
func TestInvalidInputReadAsJSON(t *testing.T) {
	tok := mustDefault(t)
	for _, s := range []string{"\xff", "abc\xe2\x82def", "\xf0\x9f\xa4 x", "<|endoftext|>\xc0"} {
		if got, want := tok.Encode(s), tok.Encode(validInputText(s)); !slices.Equal(got, want) {
			t.Errorf("Encode(%q) = %v, want %v", s, got, want)
		}
		if !strings.Contains(tok.Decode(tok.Encode(s)), "\uFFFD") {
			t.Errorf("Encode(%q) lost the replacement character", s)
		}
	}
}

func TestVocabularyShape(t *testing.T) {
	tok := mustDefault(t)
	if tok.VocabSize() != 50257 || tok.EOS() != 50256 {
		t.Fatalf("VocabSize %d EOS %d, want 50257 50256", tok.VocabSize(), tok.EOS())
	}
	tests := []struct {
		id   int32
		want string
	}{
		{0, "!"}, {15496, "Hello"}, {220, " "}, {198, "\n"}, {50256, "<|endoftext|>"},
		{131, "\xc7"}, {188, "\x00"}, {12520, " \xf0\x9f"}, {-1, ""}, {50257, ""},
	}
	for _, tt := range tests {
		if got := string(tok.TokenBytes(tt.id)); got != tt.want {
			t.Errorf("TokenBytes(%d) = %q, want %q", tt.id, got, tt.want)
		}
	}
	if again, _ := Default(); again != tok {
		t.Error("Default built a second tokenizer")
	}
}
