package tokenizer

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// TestValidInputTextIsJSONReading checks the documented input rule: invalid
// bytes become U+FFFD exactly as a JSON-encoded request decodes.
func TestValidInputTextIsJSONReading(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pool := []string{"a", " ", "é", "🤖", "\xff", "\xe2\x82", "\xf0\x9f\xa4", "\xed\xa0\x80", "\xc0\xaf", "\x80", "\xf4\x90"}
	for i := 0; i < 2000; i++ {
		var s string
		for n := rng.IntN(8); n >= 0; n-- {
			s += pool[rng.IntN(len(pool))]
		}
		body, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var viaJSON string
		if err := json.Unmarshal(body, &viaJSON); err != nil {
			t.Fatal(err)
		}
		if got := validInputText(s); got != viaJSON {
			t.Fatalf("validInputText(%q) = %q, JSON round trip gives %q", s, got, viaJSON)
		}
	}
}

// TestAppendLossy pins maximal-subpart replacement; the expected strings are
// Python's bytes.decode("utf-8", errors="replace").
func TestAppendLossy(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain é 🤖", "plain é 🤖"},
		{"\xff", "\uFFFD"},
		{"\xe2\x82", "\uFFFD"},                 // one truncated character
		{"\xe2\x82A", "\uFFFDA"},               // ... followed by ASCII
		{"\xf0\x9f\xa4", "\uFFFD"},             // truncated emoji
		{"\xed\xa0\x80", "\uFFFD\uFFFD\uFFFD"}, // surrogate: ED then two stray bytes
		{"\xc0\xaf", "\uFFFD\uFFFD"},           // overlong
		{"\xe0\x80\x80", "\uFFFD\uFFFD\uFFFD"},
		{"\xf4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"}, // above U+10FFFF
		{"\xf0\x9f\xa4\xf0\x9f\xa4\x96", "\uFFFD🤖"},
		{"\x80\x80", "\uFFFD\uFFFD"},
	}
	for _, tt := range tests {
		if got := string(appendLossy(nil, []byte(tt.in))); got != tt.want {
			t.Errorf("appendLossy(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestCompleteLen(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{"", 0},
		{"abc", 3},
		{"ab\xe2\x82", 2},       // truncated character waits
		{"ab\xf0\x9f\xa4", 2},   // ... of any length
		{"ab\xe2\x82A", 5},      // broken: emit now
		{"\xff", 1},             // never valid
		{"\xed\xa0", 2},         // ED A0 can never be completed
		{"é\xc3", 2},            // é, then a lead byte waiting
		{"\xf0\x9f\xa4\x96", 4}, // complete emoji
	}
	for _, tt := range tests {
		if got := completeLen([]byte(tt.in)); got != tt.want {
			t.Errorf("completeLen(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}
