package results

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteJSONScrubsNonFinite(t *testing.T) {
	nan := math.NaN()
	inf := math.Inf(1)
	one := 1.5
	tests := []struct {
		name string
		in   any
		want string // compact JSON
	}{
		// A nullable stat that is NaN becomes null, a finite one stays.
		{"stats pointer", Stats{Mean: &nan, P50: &one, Max: &inf, N: 2},
			`{"mean":null,"p50":1.5,"p90":null,"p99":null,"max":null,"n":2}`},
		// A plain float64 field cannot be null: it becomes 0.
		{"plain field", OfflineResult{Backend: "x", TotalS: nan, Extra: map[string]any{"a": inf, "b": "ok", "c": []any{nan, 2.0}}},
			`{"backend":"x","model":"","device":"","num_prompts":0,"input_len":0,"output_len":0,"total_input_tokens":0,"total_output_tokens":0,"prefill_s":null,"decode_s":null,"total_s":0,"request_throughput_rps":0,"output_throughput_tps":0,"total_throughput_tps":0,"extra":{"a":null,"b":"ok","c":[null,2]}}`},
		// Meta maps keep their other keys.
		{"meta map", map[string]any{"wall_s": nan, "model": "gpt2", "scales": []float64{0.4, inf}},
			`{"model":"gpt2","scales":[0.4,0],"wall_s":null}`},
		{"nil", nil, `null`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out.json")
			if err := WriteJSON(path, tc.in); err != nil {
				t.Fatalf("WriteJSON: %v", err)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var compact strings.Builder
			var v any
			if err := json.Unmarshal(data, &v); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, data)
			}
			out, _ := json.Marshal(v)
			compact.Write(out)
			var want any
			if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			wantOut, _ := json.Marshal(want)
			if compact.String() != string(wantOut) {
				t.Errorf("got  %s\nwant %s", compact.String(), wantOut)
			}
		})
	}
}

func TestWriteJSONDoesNotModifyInput(t *testing.T) {
	nan := math.NaN()
	s := Stats{Mean: &nan}
	if err := WriteJSON(filepath.Join(t.TempDir(), "s.json"), &s); err != nil {
		t.Fatal(err)
	}
	if s.Mean == nil || !math.IsNaN(*s.Mean) {
		t.Errorf("input was modified: %v", s.Mean)
	}
}

func TestWriteFileAtomicReplacesAndLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "r.json")
	for _, content := range []string{"first", "second"} {
		if err := WriteFileAtomic(path, []byte(content)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("read %q, %v; want %q", got, err, content)
		}
	}
	entries, err := os.ReadDir(filepath.Join(dir, "sub"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only r.json", len(entries))
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode().Perm())
	}
}

func TestWriteAtomicFailureKeepsOldFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	if err := WriteFileAtomic(path, []byte("old")); err != nil {
		t.Fatal(err)
	}
	err := WriteJSON(path, map[string]any{"f": func() {}}) // cannot be encoded
	if err == nil {
		t.Fatal("want an error for an unencodable value")
	}
	got, _ := os.ReadFile(path)
	if string(got) != "old" {
		t.Errorf("file changed to %q after a failed write", got)
	}
}
