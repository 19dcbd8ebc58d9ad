package server

import (
	"encoding/json"
	"testing"
)

// The reference for appendJSONString is encoding/json: whatever it encodes,
// our bytes must decode to the same string.
func checkJSONString(t *testing.T, s string) {
	t.Helper()
	got := appendJSONString(nil, s)
	var decoded string
	if err := json.Unmarshal(got, &decoded); err != nil {
		t.Fatalf("appendJSONString(%q) = %s: not JSON: %v", s, got, err)
	}
	ref, _ := json.Marshal(s)
	var want string
	if err := json.Unmarshal(ref, &want); err != nil {
		t.Fatal(err)
	}
	if decoded != want {
		t.Fatalf("appendJSONString(%q) decodes to %q, encoding/json to %q", s, decoded, want)
	}
	if b := appendJSONString(nil, []byte(s)); string(b) != string(got) {
		t.Fatalf("[]byte and string forms differ: %s vs %s", b, got)
	}
}

func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{
		"", "plain", `quote " and backslash \`, "newline\n tab\t cr\r", "\x00\x01\x1f\x7f",
		"héllo wörld", "日本語", "emoji 🤖", "invalid \xff byte", "truncated \xe6\x97", "\xed\xa0\x80 surrogate",
		"line\u2028sep\u2029", "<html>&amp;</html>", "\ufffd replacement",
	} {
		checkJSONString(t, s)
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "a\"b", "\xff\xfe", "🤖\u2028", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(checkJSONString)
}

func TestAppendJSONFloat(t *testing.T) {
	for _, tt := range []struct {
		f    float32
		want string
	}{{-0.5, "-0.5"}, {0, "0"}, {-1e-7, "-1e-07"}, {float32(negInf()), "null"}} {
		if got := string(appendJSONFloat(nil, tt.f)); got != tt.want {
			t.Errorf("appendJSONFloat(%v) = %s, want %s", tt.f, got, tt.want)
		}
	}
}

func negInf() float64 { var zero float64; return -1 / zero }
