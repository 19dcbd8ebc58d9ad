package launch

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/engine/model"
)

// TestStopTokenIDs: generation_config.json's eos_token_id (an id or a list)
// wins; without the file or the key, config.json's (an id, or a list when
// edited so); anything else is an error naming the file and the key.
func TestStopTokenIDs(t *testing.T) {
	const imEnd, endOfText = 151645, 151643
	for _, tc := range []struct {
		name    string
		gen     string // generation_config.json; "" = no file
		cfgEOS  string // replaces config.json's eos_token_id value; "" = as written (151645)
		want    []int32
		wantErr string // "" = no error; else the error names the file and eos_token_id
	}{
		{"Qwen3's list", `{"bos_token_id":151643,"eos_token_id":[151645,151643]}`, "", []int32{imEnd, endOfText}, ""},
		{"one id", `{"eos_token_id":151643}`, "", []int32{endOfText}, ""},
		{"repeated ids once", `{"eos_token_id":[151643,151643,151645]}`, "", []int32{endOfText, imEnd}, ""},
		{"empty list", `{"eos_token_id":[]}`, "", nil, ""},
		{"no file: config.json's", "", "", []int32{imEnd}, ""},
		{"no file: config.json's list", "", "[151645, 151643]", []int32{imEnd, endOfText}, ""},
		{"no key: config.json's", `{"bos_token_id":151643}`, "", []int32{imEnd}, ""},
		{"null: config.json's", `{"eos_token_id":null}`, "", []int32{imEnd}, ""},
		{"not JSON", `{"eos_token_id":`, "", nil, "generation_config.json: not a JSON object"},
		{"a list at the top", `[151645]`, "", nil, "generation_config.json: not a JSON object"},
		{"a string", `{"eos_token_id":"<|im_end|>"}`, "", nil, "generation_config.json: eos_token_id: \"<|im_end|>\" is neither"},
		{"a string in the list", `{"eos_token_id":[151645,"x"]}`, "", nil, "generation_config.json: eos_token_id: [151645,\"x\"] is neither"},
		{"a fraction", `{"eos_token_id":1.5}`, "", nil, "generation_config.json: eos_token_id: 1.5 is neither"},
		{"negative", `{"eos_token_id":[-1]}`, "", nil, "generation_config.json: eos_token_id: token id -1 is outside"},
		{"past the vocabulary", `{"eos_token_id":151936}`, "", nil, "generation_config.json: eos_token_id: token id 151936 is outside the model's vocabulary of 151936"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := qwen3TinyConfigDir(t, tc.cfgEOS)
			if tc.gen != "" {
				if err := os.WriteFile(filepath.Join(dir, GenerationConfigFile), []byte(tc.gen), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := StopTokenIDs(dir, 151936)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), dir):
				t.Fatalf("error %v does not name the file's path", err)
			case !slices.Equal(got, tc.want):
				t.Fatalf("stop ids %v, want %v", got, tc.want)
			}
		})
	}
}

// TestResolveStopTokens: Resolve carries a checkpoint's stop ids (Qwen3's
// two from the files init-model writes), and a malformed
// generation_config.json stops it before any weights load.
func TestResolveStopTokens(t *testing.T) {
	dir := qwen3TinyConfigDir(t, "")
	cfg, err := model.Preset("qwen3-tiny")
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteModelFiles(dir, cfg); err != nil {
		t.Fatal(err)
	}
	o := Defaults()
	o.ModelDir, o.Device = dir, "sim"
	r, err := Resolve(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int32{151645, 151643}; !slices.Equal(r.StopTokens, want) {
		t.Errorf("stop ids %v, want %v", r.StopTokens, want)
	}
	if err := os.WriteFile(filepath.Join(dir, GenerationConfigFile), []byte(`{"eos_token_id":"151645"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Resolve(o, nil); err == nil || !strings.Contains(err.Error(), GenerationConfigFile+": eos_token_id") {
		t.Errorf("malformed %s: error %v", GenerationConfigFile, err)
	}
}

// qwen3TinyConfigDir is a directory holding qwen3-tiny's config.json, with
// its eos_token_id value replaced by eos unless that is empty.
func qwen3TinyConfigDir(t *testing.T, eos string) string {
	t.Helper()
	cfg, err := model.Preset("qwen3-tiny")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, model.ConfigFile)
	if err := model.WriteConfig(path, cfg, "bfloat16"); err != nil {
		t.Fatal(err)
	}
	if eos == "" {
		return dir
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), `"eos_token_id": 151645`, `"eos_token_id": `+eos, 1)
	if edited == string(data) {
		t.Fatalf("no eos_token_id in %s", data)
	}
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
