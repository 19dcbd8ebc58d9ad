package profile

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutputDirConfined drives the profiler over HTTP with Options.Dir set:
// an output_dir that resolves outside Dir is a 400 naming Dir and creates
// nothing; one inside gets the capture's files.
func TestOutputDirConfined(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "profiles")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{root, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "missing"), filepath.Join(root, "dangling")); err != nil {
		t.Fatal(err)
	}
	p := New(NewRecorder(0), Options{Getenv: func(string) string { return "" }, Dir: root})
	srv := httptest.NewServer(p.Handler())
	defer srv.Close()
	start := func(outputDir string) (int, map[string]any) {
		return post(t, srv.URL+StartPath, `{"tool":"torch","output_dir":`+string(must(json.Marshal(outputDir)))+`}`)
	}

	rejected := []struct {
		name, outputDir string
		mustNotExist    string // made by a start that wrongly succeeds
	}{
		{"absolute outside", filepath.Join(outside, "x"), filepath.Join(outside, "x")},
		{"relative climbing out", "../outside/y", filepath.Join(outside, "y")},
		{"absolute climbing out", filepath.Join(root, "a", "..", "..", "outside", "z"), filepath.Join(outside, "z")},
		{"sibling sharing the prefix", root + "-evil", root + "-evil"},
		{"symlink out of the dir", filepath.Join(root, "link", "w"), filepath.Join(outside, "w")},
		{"dangling symlink", filepath.Join(root, "dangling", "v"), filepath.Join(outside, "missing")},
		{"filesystem root", "/", ""},
	}
	for _, tc := range rejected {
		code, m := start(tc.outputDir)
		detail, _ := m["detail"].(string)
		if code != 400 || !strings.Contains(detail, "outside the profile directory "+root) {
			t.Errorf("%s: %d %v, want 400 naming %s", tc.name, code, m, root)
		}
		if code == 200 { // stop it, so that the next case is judged alone
			post(t, srv.URL+StopPath, "")
		}
		if tc.mustNotExist == "" {
			continue
		}
		if _, err := os.Lstat(tc.mustNotExist); err == nil {
			t.Errorf("%s: %s was created", tc.name, tc.mustNotExist)
		}
	}
	if p.Recorder().IsActive() {
		t.Fatal("recorder active after rejected starts")
	}

	accepted := []struct{ name, outputDir, want string }{
		{"absolute inside", filepath.Join(root, "runs", "torch", "a"), filepath.Join(root, "runs", "torch", "a")},
		{"relative", "rel/b", filepath.Join(root, "rel", "b")},
		{"climbing back in", filepath.Join(root, "x", "..", "c"), filepath.Join(root, "c")},
		{"the dir itself", root, root},
		{"empty: the dir itself", "", root},
	}
	for _, tc := range accepted {
		if code, m := start(tc.outputDir); code != 200 {
			t.Errorf("%s: start %d %v", tc.name, code, m)
			continue
		}
		code, m := post(t, srv.URL+StopPath, "")
		if code != 200 || m["output_dir"] != tc.want {
			t.Errorf("%s: stop %d, output_dir %v, want %s", tc.name, code, m["output_dir"], tc.want)
		}
		if _, err := os.Stat(filepath.Join(tc.want, TraceFile)); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
