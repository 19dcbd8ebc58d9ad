package results

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestNonFiniteToNull(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"a": NaN}`, `{"a": null}`},
		{`[Infinity, -Infinity, 1.5]`, `[null, null, 1.5]`},
		{`{"s": "NaN is a string", "b": NaN}`, `{"s": "NaN is a string", "b": null}`},
		{`{"s": "quote \" NaN", "x": 1}`, `{"s": "quote \" NaN", "x": 1}`},
		{`{"s": "back\\", "n": NaN}`, `{"s": "back\\", "n": null}`},
		{`{"plain": 1}`, `{"plain": 1}`},
	}
	for _, c := range cases {
		if got := string(nonFiniteToNull([]byte(c.in))); got != c.want {
			t.Errorf("nonFiniteToNull(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestLoadOriginalOnline(t *testing.T) {
	on, err := LoadOnline("testdata/report_original_online.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(on.Summaries); got != 15 {
		t.Fatalf("summaries = %d, want 15", got)
	}
	for _, s := range on.Summaries {
		if !s.Valid {
			t.Errorf("%s@%g: original summary without a valid key must load as valid", s.Backend, s.Scale)
		}
		switch {
		case s.Backend == "trtllm":
			if s.TTFTMs.P90 != nil {
				t.Errorf("trtllm NaN p90 loaded as %v, want nil", *s.TTFTMs.P90)
			}
		case s.Backend == "sglang" && s.Scale == 0.8:
			if s.ITLMs.P50 != nil {
				t.Errorf("missing itl_ms loaded with p50 %v", *s.ITLMs.P50)
			}
		default:
			if s.TTFTMs.P90 == nil {
				t.Errorf("%s@%g: ttft p90 missing", s.Backend, s.Scale)
			}
		}
	}
	if r := on.ByBackend["vllm"].Runs[0]; !r.Summary.Valid {
		t.Error("by_backend run summary must default to valid")
	}
}

func TestLoadOursKeepsInvalid(t *testing.T) {
	on, err := LoadOnline("testdata/report_ours_online.json")
	if err != nil {
		t.Fatal(err)
	}
	invalid := 0
	for _, s := range on.Summaries {
		if !s.Valid {
			invalid++
			if s.Backend != "vllm" || s.Scale != 0.4 || s.InvalidReason == "" {
				t.Errorf("unexpected invalid summary %s@%g %q", s.Backend, s.Scale, s.InvalidReason)
			}
		}
	}
	if invalid != 1 {
		t.Errorf("invalid summaries = %d, want 1", invalid)
	}
}

func TestLoadRun(t *testing.T) {
	dir := t.TempDir()
	copyFile(t, "testdata/report_original_online.json", filepath.Join(dir, OnlineResultsFile))
	copyFile(t, "testdata/report_original_offline.json", filepath.Join(dir, OfflineResultsFile))

	cases := []struct {
		name             string
		path             string
		wantOn, wantOff  bool
		wantErr, notThis error
	}{
		{name: "dir with both", path: dir, wantOn: true, wantOff: true},
		{name: "online file", path: "testdata/report_original_single.json", wantOn: true},
		{name: "offline file", path: "testdata/report_ours_offline.json", wantOff: true},
		{name: "empty dir", path: t.TempDir(), wantErr: ErrNoResults},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			on, off, err := LoadRun(c.path)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("err = %v, want %v", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (on != nil) != c.wantOn || (off != nil) != c.wantOff {
				t.Errorf("online loaded %v (want %v), offline %v (want %v)", on != nil, c.wantOn, off != nil, c.wantOff)
			}
		})
	}
}

func TestLoadRejectsGarbage(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]string{
		"truncated.json": `{"meta": {}, "summaries": [`,
		"other.json":     `{"hello": "world"}`,
		"list.json":      `[1, 2]`,
	}
	for name, body := range cases {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, err := LoadRun(p); err == nil {
			t.Errorf("%s: LoadRun succeeded on garbage", name)
		}
		if _, err := LoadOnline(p); err == nil {
			t.Errorf("%s: LoadOnline succeeded on garbage", name)
		}
	}
	if _, _, err := LoadRun(filepath.Join(dir, "absent")); err == nil {
		t.Error("LoadRun succeeded on a missing path")
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// FuzzDecodeOnline: no input may panic the lenient decoder.
func FuzzDecodeOnline(f *testing.F) {
	for _, name := range []string{"report_original_single.json", "report_original_offline.json"} {
		data, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"summaries": [{"valid": NaN, "rounds": [{}]}], "by_backend": {"x": null}}`))
	f.Add([]byte(`{"summaries": NaN, "by_backend": {"x": {"runs": [{"summary": {"rounds": [{"valid": true}]}}]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = DecodeOnline(data)
		_, _ = DecodeOffline(data)
	})
}
