package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestBadInput: every documented bad input gets its status and an
// OpenAI-style body naming the field (docs/roseinfer-api.md, "Errors").
func TestBadInput(t *testing.T) {
	longPrompt := `"` + strings.Repeat(" hello", 1100) + `"`
	manyPrompts := `[` + strings.Repeat(`"a",`, maxPromptsPerCall) + `"a"]`
	const c, chat = "/v1/completions", "/v1/chat/completions"
	tests := []struct {
		name, path, body string
		status           int
		param, code      string // "" = null
	}{
		{"invalid JSON", c, `{"prompt":`, 400, "", ""},
		{"not an object", c, `[1,2]`, 400, "", ""},
		{"empty body", c, ``, 400, "", ""},
		{"trailing data", c, `{"prompt":"x"} {}`, 400, "", ""},
		{"max_tokens is a string", c, `{"prompt":"x","max_tokens":"5"}`, 400, "max_tokens", ""},
		{"max_tokens is fractional", c, `{"prompt":"x","max_tokens":1.5}`, 400, "max_tokens", ""},
		{"temperature is a string", c, `{"prompt":"x","temperature":"hot"}`, 400, "temperature", ""},
		{"stream is a string", c, `{"prompt":"x","stream":"yes"}`, 400, "stream", ""},
		{"include_usage is a number", c, `{"prompt":"x","stream":true,"stream_options":{"include_usage":1}}`, 400,
			"stream_options.include_usage", ""},
		{"unknown model", c, `{"model":"gpt-4","prompt":"x"}`, 404, "model", "model_not_found"},
		{"no prompt", c, `{"model":"gpt2"}`, 400, "prompt", ""},
		{"null prompt", c, `{"prompt":null}`, 400, "prompt", ""},
		{"empty prompt", c, `{"prompt":""}`, 400, "prompt", ""},
		{"empty prompt list", c, `{"prompt":[]}`, 400, "prompt", ""},
		{"empty token list in a list", c, `{"prompt":[[]]}`, 400, "prompt", ""},
		{"empty string in a list", c, `{"prompt":["a",""]}`, 400, "prompt", ""},
		{"prompt is a number", c, `{"prompt":5}`, 400, "prompt", ""},
		{"prompt is an object", c, `{"prompt":{"a":1}}`, 400, "prompt", ""},
		{"token id above the vocabulary", c, `{"prompt":[50257]}`, 400, "prompt", ""},
		{"negative token id", c, `{"prompt":[-1]}`, 400, "prompt", ""},
		{"fractional token id", c, `{"prompt":[1.5]}`, 400, "prompt", ""},
		{"mixed prompt list", c, `{"prompt":[1,"a"]}`, 400, "prompt", ""},
		{"mixed list of prompts", c, `{"prompt":["a",1]}`, 400, "prompt", ""},
		{"too many prompts", c, `{"prompt":` + manyPrompts + `}`, 400, "prompt", ""},
		{"prompt + max_tokens over the context", c, `{"prompt":"x","max_tokens":1024}`, 400, "max_tokens",
			"context_length_exceeded"},
		{"prompt over the context", c, `{"prompt":` + longPrompt + `}`, 400, "max_tokens", "context_length_exceeded"},
		{"max_tokens 0", c, `{"prompt":"x","max_tokens":0}`, 400, "max_tokens", ""},
		{"max_tokens negative", c, `{"prompt":"x","max_tokens":-3}`, 400, "max_tokens", ""},
		{"temperature negative", c, `{"prompt":"x","temperature":-0.1}`, 400, "temperature", ""},
		{"temperature huge", c, `{"prompt":"x","temperature":1e300}`, 400, "temperature", ""},
		{"top_p 0", c, `{"prompt":"x","top_p":0}`, 400, "top_p", ""},
		{"top_p above 1", c, `{"prompt":"x","top_p":1.5}`, 400, "top_p", ""},
		{"top_k below -1", c, `{"prompt":"x","top_k":-2}`, 400, "top_k", ""},
		{"n 2", c, `{"prompt":"x","n":2}`, 400, "n", "unsupported_parameter"},
		{"n 0", c, `{"prompt":"x","n":0}`, 400, "n", ""},
		{"best_of 2", c, `{"prompt":"x","best_of":2}`, 400, "best_of", "unsupported_parameter"},
		{"stop list too long", c, `{"prompt":"x","stop":["a","b","c","d","e"]}`, 400, "stop", ""},
		{"stop is a number", c, `{"prompt":"x","stop":5}`, 400, "stop", ""},
		{"stop list holds a number", c, `{"prompt":"x","stop":["a",5]}`, 400, "stop", ""},
		{"min_tokens negative", c, `{"prompt":"x","min_tokens":-1}`, 400, "min_tokens", ""},
		{"min_tokens above max_tokens", c, `{"prompt":"x","max_tokens":4,"min_tokens":5}`, 400, "min_tokens", ""},
		{"logprobs above 5", c, `{"prompt":"x","logprobs":6}`, 400, "logprobs", ""},
		{"echo", c, `{"prompt":"x","echo":true}`, 400, "echo", "unsupported_parameter"},
		{"suffix", c, `{"prompt":"x","suffix":"y"}`, 400, "suffix", "unsupported_parameter"},
		{"presence_penalty", c, `{"prompt":"x","presence_penalty":0.5}`, 400, "presence_penalty",
			"unsupported_parameter"},
		{"logit_bias", c, `{"prompt":"x","logit_bias":{"50256":-100}}`, 400, "logit_bias", "unsupported_parameter"},
		{"stream_options without stream", c, `{"prompt":"x","stream_options":{"include_usage":true}}`, 400,
			"stream_options", ""},
		{"server timing with two prompts", c, `{"prompt":["a","b"],"return_server_timing":true}`, 400,
			"return_server_timing", ""},
		{"body too large", c, `{"prompt":"` + strings.Repeat("x", 1<<20) + `"}`, 413, "", "request_too_large"},

		{"chat without messages", chat, `{"model":"gpt2"}`, 400, "messages", ""},
		{"chat with empty messages", chat, `{"messages":[]}`, 400, "messages", ""},
		{"chat role tool", chat, `{"messages":[{"role":"tool","content":"x"}]}`, 400, "messages", ""},
		{"chat content is a number", chat, `{"messages":[{"role":"user","content":5}]}`, 400, "messages", ""},
		{"chat image part", chat, `{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, 400,
			"messages", "unsupported_parameter"},
		{"chat messages is an object", chat, `{"messages":{}}`, 400, "messages", ""},
		{"chat enable_thinking is a string", chat,
			`{"chat_template_kwargs":{"enable_thinking":"false"},"messages":[{"role":"user","content":"hi"}]}`, 400,
			"chat_template_kwargs", ""},
		{"chat enable_thinking is a number", chat,
			`{"chat_template_kwargs":{"enable_thinking":0},"messages":[{"role":"user","content":"hi"}]}`, 400,
			"chat_template_kwargs", ""},
		{"chat_template_kwargs is a list", chat,
			`{"chat_template_kwargs":[true],"messages":[{"role":"user","content":"hi"}]}`, 400,
			"chat_template_kwargs", ""},
		{"chat_template_kwargs sets the template", chat,
			`{"chat_template_kwargs":{"chat_template":"x"},"messages":[{"role":"user","content":"hi"}]}`, 400,
			"chat_template_kwargs", ""},
		{"chat tools", chat, `{"tools":[{"type":"function","function":{"name":"f"}}],` +
			`"messages":[{"role":"user","content":"hi"}]}`, 400, "tools", "unsupported_parameter"},
		{"chat tool_calls", chat, `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"",` +
			`"tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, 400,
			"messages", "unsupported_parameter"},
		{"chat reasoning_content is a number", chat,
			`{"messages":[{"role":"assistant","content":"a","reasoning_content":1}]}`, 400,
			"messages.reasoning_content", ""},
		{"chat unknown model", chat, `{"model":"x","messages":[{"role":"user","content":"hi"}]}`, 404, "model",
			"model_not_found"},
		{"chat logprobs", chat, `{"logprobs":true,"messages":[{"role":"user","content":"hi"}]}`, 400, "logprobs",
			"unsupported_parameter"},
		{"chat max_tokens 0", chat, `{"max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, 400,
			"max_tokens", ""},
		{"chat max_completion_tokens over the context", chat,
			`{"max_completion_tokens":5000,"messages":[{"role":"user","content":"hi"}]}`, 400, "max_tokens",
			"context_length_exceeded"},
	}
	s := startServer(t, newFakeEngine(t, script), func(c *Config) { c.MaxBodyBytes = 1 << 20 })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := post(t, s, tt.path, tt.body)
			checkErrorBody(t, resp, body, tt.status, tt.param, tt.code)
		})
	}
}

func TestBadRoutes(t *testing.T) {
	s := startServer(t, newFakeEngine(t, script))
	for _, tt := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/v1/completions", 405},
		{"PUT", "/v1/chat/completions", 405},
		{"POST", "/health", 405},
		{"GET", "/v2/whatever", 404},
	} {
		req, _ := http.NewRequest(tt.method, s.URL()+tt.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var b errorBody
		err = json.NewDecoder(resp.Body).Decode(&b)
		resp.Body.Close()
		if resp.StatusCode != tt.status || err != nil || b.Error.Message == "" {
			t.Errorf("%s %s: %d %+v %v", tt.method, tt.path, resp.StatusCode, b, err)
		}
	}
}

// checkErrorBody asserts the status and the exact shape of the error body:
// all four keys present, param and code null or the expected string.
func checkErrorBody(t *testing.T, resp *http.Response, body []byte, status int, param, code string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("content type %q", ct)
	}
	var env map[string]map[string]json.RawMessage
	if err := json.Unmarshal(body, &env); err != nil || len(env) != 1 || env["error"] == nil {
		t.Fatalf("not an error envelope: %s", body)
	}
	e := env["error"]
	var msg, typ string
	if json.Unmarshal(e["message"], &msg) != nil || msg == "" || json.Unmarshal(e["type"], &typ) != nil || typ == "" {
		t.Errorf("message/type: %s", body)
	}
	for key, want := range map[string]string{"param": param, "code": code} {
		raw, ok := e[key]
		wantRaw := "null"
		if want != "" {
			b, _ := json.Marshal(want)
			wantRaw = string(b)
		}
		if !ok || string(raw) != wantRaw {
			t.Errorf("%s = %s, want %s (%s)", key, raw, wantRaw, body)
		}
	}
}
