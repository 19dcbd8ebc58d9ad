package server

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/engine/model/arch"
	"github.com/roseinfer/roseinfer/engine/tokenizer"
)

type tokenizeReply struct {
	Tokens      []int32 `json:"tokens"`
	Count       int     `json:"count"`
	MaxModelLen int     `json:"max_model_len"`
	Prompt      string  `json:"prompt"`
}

func postOK(t *testing.T, s *Server, path, body string) tokenizeReply {
	t.Helper()
	resp, b := post(t, s, path, body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: status %d: %s", path, body, resp.StatusCode, b)
	}
	var r tokenizeReply
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return r
}

// TestTokenizeRoundTrip: /tokenize gives Encode's ids with vLLM's fields,
// /detokenize gives the text back, and both answer before the engine is set
// (they need only the tokenizer).
func TestTokenizeRoundTrip(t *testing.T) {
	s := startServer(t, nil)
	tok := testTokenizer(t)
	text := "Hello world, it's 2026!<|endoftext|>"
	r := postOK(t, s, "/tokenize", `{"model":"gpt2","prompt":"Hello world, it's 2026!<|endoftext|>"}`)
	if want := tok.Encode(text); !slices.Equal(r.Tokens, want) || r.Count != len(want) || r.MaxModelLen != 1024 {
		t.Fatalf("tokenize = %+v, want tokens %v, count %d, max_model_len 1024", r, want, len(want))
	}
	ids, _ := json.Marshal(r.Tokens)
	if d := postOK(t, s, "/detokenize", `{"model":"gpt2","tokens":`+string(ids)+`}`); d.Prompt != text {
		t.Errorf("detokenize = %q, want %q", d.Prompt, text)
	}
	// No model means the served one, as in the other routes; an empty prompt has no tokens.
	if r := postOK(t, s, "/tokenize", `{"prompt":""}`); r.Count != 0 || r.Tokens == nil {
		t.Errorf("empty prompt: %+v, want tokens [] and count 0", r)
	}
	if d := postOK(t, s, "/detokenize", `{"tokens":[]}`); d.Prompt != "" {
		t.Errorf("no tokens: %q", d.Prompt)
	}
}

// TestTokenizeMessages: "messages" are rendered by the server's chat format.
func TestTokenizeMessages(t *testing.T) {
	s := startServer(t, newFakeEngine(t, script))
	msgs := []arch.ChatMessage{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}}
	text, err := arch.PlainChat(msgs, arch.ChatOptions{AddGenerationPrompt: true, EnableThinking: true})
	if err != nil {
		t.Fatal(err)
	}
	want := testTokenizer(t).Encode(text)
	r := postOK(t, s, "/tokenize", `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]}`)
	if !slices.Equal(r.Tokens, want) {
		t.Errorf("tokens %v, want %v", r.Tokens, want)
	}
}

// TestTokenizeQwen3: with Qwen3's tokenizer, special and added tokens in the
// prompt are single ids and come back as text.
func TestTokenizeQwen3(t *testing.T) {
	tok, err := tokenizer.Qwen3()
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, nil, func(c *Config) { c.Tokenizer, c.VocabSize, c.ModelName = tok, 151936, "qwen3" })
	text := "<|im_start|>user\n你好 <think>x</think><|im_end|>"
	r := postOK(t, s, "/tokenize", `{"model":"qwen3","prompt":"<|im_start|>user\n你好 <think>x</think><|im_end|>"}`)
	if !slices.Equal(r.Tokens, tok.Encode(text)) || r.Tokens[0] != 151644 || r.Tokens[len(r.Tokens)-1] != 151645 {
		t.Fatalf("tokens %v", r.Tokens)
	}
	ids, _ := json.Marshal(r.Tokens)
	if d := postOK(t, s, "/detokenize", `{"model":"qwen3","tokens":`+string(ids)+`}`); d.Prompt != text {
		t.Errorf("detokenize = %q, want %q", d.Prompt, text)
	}
}

// TestTokenizeErrors: bad input is a 400 (a wrong model a 404) with an
// OpenAI-style error naming the field.
func TestTokenizeErrors(t *testing.T) {
	s := startServer(t, nil)
	for _, tc := range []struct {
		path, body string
		status     int
		param      string
	}{
		{"/tokenize", `{"model":"gpt-4","prompt":"x"}`, 404, "model"},
		{"/tokenize", `{"model":"gpt2"}`, 400, "prompt"},
		{"/tokenize", `{"prompt":"x","messages":[{"role":"user","content":"y"}]}`, 400, "prompt"},
		{"/tokenize", `{"prompt":[1,2]}`, 400, "prompt"},
		{"/tokenize", `{"messages":[{"role":"wizard","content":"y"}]}`, 400, "messages"},
		{"/tokenize", `{"prompt":"x"`, 400, ""},
		{"/detokenize", `{"model":"gpt-4","tokens":[1]}`, 404, "model"},
		{"/detokenize", `{}`, 400, "tokens"},
		{"/detokenize", `{"tokens":[1,50257]}`, 400, "tokens"},
		{"/detokenize", `{"tokens":[-1]}`, 400, "tokens"},
		{"/detokenize", `{"tokens":[1.5]}`, 400, "tokens"},
		{"/detokenize", `{"tokens":"abc"}`, 400, "tokens"},
	} {
		resp, b := post(t, s, tc.path, tc.body)
		var body struct {
			Error struct {
				Type  string  `json:"type"`
				Param *string `json:"param"`
			} `json:"error"`
		}
		_ = json.Unmarshal(b, &body)
		param := ""
		if body.Error.Param != nil {
			param = *body.Error.Param
		}
		if resp.StatusCode != tc.status || body.Error.Type != "invalid_request_error" || param != tc.param {
			t.Errorf("%s %s: %d %s, want %d with param %q", tc.path, tc.body, resp.StatusCode, b, tc.status, tc.param)
		}
	}
}

// TestTokenizeWithoutAPIKey: as in vLLM, whose key guards only /v1, the two
// routes answer without the key while /v1 routes need it.
func TestTokenizeWithoutAPIKey(t *testing.T) {
	s := startServer(t, newFakeEngine(t, script), func(c *Config) { c.APIKey = "sekrit" })
	postOK(t, s, "/tokenize", `{"prompt":"x"}`)
	postOK(t, s, "/detokenize", `{"tokens":[87]}`)
	if resp, b := post(t, s, "/v1/completions", `{"prompt":"x"}`); resp.StatusCode != http.StatusUnauthorized ||
		!strings.Contains(string(b), "invalid_api_key") {
		t.Errorf("/v1/completions without the key: %d %s", resp.StatusCode, b)
	}
}
