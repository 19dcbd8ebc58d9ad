package main

import (
	"cmp"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/engine/launch"
	"github.com/roseinfer/roseinfer/engine/model"
	"github.com/roseinfer/roseinfer/engine/model/qwen3"
)

// TestServeQwen3StopTokens serves an init-model qwen3-tiny checkpoint whose
// weights make one stop id the greedy choice after any prompt (see
// forceArgmax): <|im_end|> and <|endoftext|> (generation_config.json's
// second id, which config.json does not name) each end a completion with
// finish_reason "stop", unless ignore_eos; without generation_config.json
// only config.json's <|im_end|> does. /v1/models lists --model as given,
// or --served-model-name.
func TestServeQwen3StopTokens(t *testing.T) {
	dir := t.TempDir()
	if err := runInitModel(initModelOptions{preset: "qwen3-tiny", seed: 1, dtype: "bf16", out: dir}, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		argmax     int32
		noGenCfg   bool   // remove generation_config.json first
		servedName string // --served-model-name
		ignoreEOS  bool
		wantIDs    []int32
		wantFinish string
	}{
		{"<|im_end|> stops", qwen3.EOSTokenID, false, "", false, []int32{qwen3.EOSTokenID}, "stop"},
		{"<|endoftext|> stops", qwen3.EndOfTextTokenID, false, "", false, []int32{qwen3.EndOfTextTokenID}, "stop"},
		{"ignore_eos runs to max_tokens", qwen3.EndOfTextTokenID, false, "", true, repeatID(qwen3.EndOfTextTokenID, 5), "length"},
		{"no generation_config.json: config.json's id only", qwen3.EndOfTextTokenID, true, "qwen3-test", false,
			repeatID(qwen3.EndOfTextTokenID, 5), "length"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forceArgmax(t, dir, tc.argmax)
			if tc.noGenCfg {
				if err := os.Remove(filepath.Join(dir, launch.GenerationConfigFile)); err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
			}
			o := serveOptions{profileDir: t.TempDir(), modelName: tc.servedName}
			o.engineOptions = defaultEngineOptions()
			o.ModelDir = dir
			url, stop := startServeOn(t, o, "cpu")
			defer stop()

			name := cmp.Or(tc.servedName, dir)
			if got := listedModels(t, url); !slices.Equal(got, []string{name}) {
				t.Errorf("/v1/models lists %q, want [%q]", got, name)
			}
			body, _ := json.Marshal(map[string]any{"model": name, "prompt": "Hello, world", "max_tokens": 5,
				"temperature": 0, "ignore_eos": tc.ignoreEOS})
			ids, finish, text := completion(t, url, string(body))
			if !slices.Equal(ids, tc.wantIDs) || finish != tc.wantFinish {
				t.Errorf("tokens %v finish_reason %q, want %v %q", ids, finish, tc.wantIDs, tc.wantFinish)
			}
			// The stop id that ended the text is not part of it.
			if finish == "stop" && text != "" {
				t.Errorf("text %q, want none", text)
			}
			// Any other name is refused: the harness must send this one.
			if code, _ := call(t, "POST", url+"/v1/completions", "", `{"model":"gpt2","prompt":"Hi","max_tokens":1}`); code != 404 {
				t.Errorf("model gpt2: status %d, want 404", code)
			}
		})
	}

	// A malformed generation_config.json stops serve before it listens,
	// naming the file and the key.
	if err := os.WriteFile(filepath.Join(dir, launch.GenerationConfigFile), []byte(`{"eos_token_id":["<|im_end|>"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	o := serveOptions{profileDir: t.TempDir(), host: "127.0.0.1", streamInterval: 1, logLevel: "info"}
	o.engineOptions = defaultEngineOptions()
	o.ModelDir, o.Device = dir, "cpu"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o.ready = func(string) {
		t.Error("serve listened with a malformed generation_config.json")
		cancel()
	}
	err := runServe(ctx, o, io.Discard)
	if want := filepath.Join(dir, launch.GenerationConfigFile) + ": eos_token_id"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want one naming %q", err, want)
	}
}

// forceArgmax rewrites the checkpoint in dir so that id is the greedy token
// after any prompt, through the real forward pass: the attention and MLP
// output projections are zero, so the final hidden state is the last
// token's embedding; the final RMSNorm keeps channel 0 alone, which every
// embedding row sets to 1 and id's row to 8. The normed channel is then
// positive, and the tied LM head scores id 8 times any other token.
func forceArgmax(t *testing.T, dir string, id int32) {
	t.Helper()
	w, err := model.LoadCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	tensor := func(name string) []float32 {
		x, err := w.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		return x.Data
	}
	clear(tensor(qwen3.AttProjW))
	clear(tensor(qwen3.DownW))
	norm := tensor(qwen3.NormW)
	clear(norm)
	norm[0] = 1
	embed, C := tensor(qwen3.Embed), w.Config.Channels
	for v := range w.Config.VocabSize {
		embed[v*C] = 1
	}
	embed[int(id)*C] = 8
	if err := model.WriteCheckpoint(dir, w.Config, w, model.BF16); err != nil {
		t.Fatal(err)
	}
}

// listedModels are the ids /v1/models lists.
func listedModels(t *testing.T, url string) []string {
	t.Helper()
	code, body := call(t, "GET", url+"/v1/models", "", "")
	if code != 200 {
		t.Fatalf("/v1/models: status %d: %s", code, body)
	}
	var list struct{ Data []struct{ ID string } }
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	return ids
}

// completion sends a non-streaming completion and returns its token ids,
// finish_reason and text.
func completion(t *testing.T, url, body string) (ids []int32, finish, text string) {
	t.Helper()
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	var r struct {
		Choices []struct {
			TokenIDs     []int32 `json:"token_ids"`
			FinishReason string  `json:"finish_reason"`
			Text         string  `json:"text"`
		}
	}
	if err := json.Unmarshal(data, &r); err != nil || len(r.Choices) != 1 {
		t.Fatalf("%v: %s", err, data)
	}
	c := r.Choices[0]
	return c.TokenIDs, c.FinishReason, c.Text
}

func repeatID(id int32, n int) []int32 { return slices.Repeat([]int32{id}, n) }
