package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestServeQwen3 writes a qwen3-tiny checkpoint with init-model (the real
// tokenizer files beside the weights) and serves it on the CPU device: a
// completion and a chat completion, each streaming and not, with the chat
// rendered by Qwen3's template and stopped by its stop id.
func TestServeQwen3(t *testing.T) {
	dir := t.TempDir()
	if err := runInitModel(initModelOptions{preset: "qwen3-tiny", seed: 1, dtype: "bf16", out: dir}, io.Discard); err != nil {
		t.Fatal(err)
	}
	o := serveOptions{profileDir: t.TempDir()}
	o.engineOptions = defaultEngineOptions()
	o.ModelDir = dir
	url, stop := startServeOn(t, o, "cpu")
	defer stop()

	for _, tc := range []struct{ route, body string }{
		{"/v1/completions", `{"prompt":"<|im_start|>user\n你好 hello<|im_end|>\n","max_tokens":6,"ignore_eos":true}`},
		{"/v1/chat/completions", `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi 👋"}],` +
			`"max_tokens":6,"ignore_eos":true,"chat_template_kwargs":{"enable_thinking":false}}`},
	} {
		for _, stream := range []bool{false, true} {
			body := strings.TrimSuffix(tc.body, "}") + `,"stream":` + map[bool]string{false: "false", true: "true"}[stream] + "}"
			resp, err := http.Post(url+tc.route, "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			ids := readTokenIDs(t, resp, stream)
			if len(ids) != 6 {
				t.Errorf("%s stream=%v: %d tokens, want 6", tc.route, stream, len(ids))
			}
			for _, id := range ids {
				if id < 0 || id >= 151936 {
					t.Errorf("%s stream=%v: token %d outside Qwen3's vocabulary", tc.route, stream, id)
				}
			}
		}
	}
}

// readTokenIDs reads a completion's generated ids, streamed (SSE chunks up to
// [DONE]) or not.
func readTokenIDs(t *testing.T, resp *http.Response, stream bool) []int {
	t.Helper()
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	type choice struct {
		TokenIDs []int `json:"token_ids"`
	}
	var ids []int
	if !stream {
		var r struct{ Choices []choice }
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			t.Fatal(err)
		}
		for _, c := range r.Choices {
			ids = append(ids, c.TokenIDs...)
		}
		return ids
	}
	sc := bufio.NewScanner(resp.Body)
	done := false
	for sc.Scan() {
		payload, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if payload == "[DONE]" {
			done = true
			continue
		}
		var chunk struct{ Choices []choice }
		if err := json.Unmarshal([]byte(payload), &chunk); err != nil {
			t.Fatalf("%v: %s", err, payload)
		}
		for _, c := range chunk.Choices {
			ids = append(ids, c.TokenIDs...)
		}
	}
	if !done {
		t.Fatal("stream ended without [DONE]")
	}
	return ids
}
