package results

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// originalManifest is shaped like the original harness's profile manifest,
// including a bare NaN as Python's json module writes it.
const originalManifest = `{
  "meta": {"profile": "both", "profile_only": false, "profile_n": 32, "profile_scale": 0.4, "profile_wall_s": NaN,
           "tools": ["torch", "nsys"], "backends": ["roseinfer", "vllm"]},
  "runs": [
    {"tool": "torch", "backend": "roseinfer", "base_backend": "roseinfer", "port": 18000,
     "cmd": ["python", "-m", "rosellm.roseinfer.server"], "log_path": "x/roseinfer.profile_torch.server.log",
     "output_dir": "x/profiles/torch/roseinfer", "nsys_output_prefix": null, "wall_s": 12.5, "profile_error": null},
    {"tool": "nsys", "backend": "vllm", "base_backend": "vllm", "port": 18001, "cmd": ["nsys", "profile"],
     "log_path": "l", "output_dir": "o", "nsys_output_prefix": "o/vllm", "wall_s": 30,
     "profile_error": "nsys report not produced: o/vllm.nsys-rep"}
  ]
}`

func TestProfileManifestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	orig := filepath.Join(dir, "orig.json")
	os.WriteFile(orig, []byte(originalManifest), 0o644)
	m, err := LoadProfileManifest(orig)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Runs) != 2 || m.Runs[0].ProfileError != nil || m.Runs[1].ProfileError == nil ||
		*m.Runs[1].NsysOutputPrefix != "o/vllm" || m.Meta["profile_wall_s"] != nil || m.Runs[0].Port != 18000 {
		t.Fatalf("loaded %+v", m)
	}
	m.Runs[0].Files = []ProfileFile{{Kind: "chrome_trace", Path: "x/profiles/torch/roseinfer/trace.json", Bytes: 10}}
	m.Runs[0].Pprof = []PprofSummary{{Kind: "pprof_cpu", Path: "p", Top: []PprofFunc{{Function: "f", Flat: 1}}}}
	out := filepath.Join(dir, ProfileManifestFile)
	if err := WriteJSON(out, m); err != nil {
		t.Fatal(err)
	}
	back, err := LoadProfileManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, m) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back, m)
	}
	data, _ := os.ReadFile(out)
	// A run without an error must say so explicitly, as the original does.
	if !strings.Contains(string(data), `"profile_error": null`) || !strings.Contains(string(data), `"nsys_output_prefix": null`) {
		t.Errorf("null fields missing:\n%s", data)
	}
}
