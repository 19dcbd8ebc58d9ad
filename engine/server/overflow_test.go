package server

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// TestHugeMaxTokensOverHTTP: a max_tokens near 2^63 is a context error, not a
// 500. prompt + max_tokens used to wrap negative, pass the context check and
// panic in the engine's make(chan Output, MaxTokens+1). The real engine (sim
// device) sits behind the real server on a loopback port.
func TestHugeMaxTokensOverHTTP(t *testing.T) {
	ss := startSimServer(t, time.Millisecond, nil)
	const c, chat = "/v1/completions", "/v1/chat/completions"
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	for _, tt := range []struct{ name, path, body string }{
		{"max_tokens 2^63-1", c, fmt.Sprintf(`{"prompt":"Hello","max_tokens":%d}`, int64(math.MaxInt64))},
		{"max_tokens 2^63-1, token ids", c, fmt.Sprintf(`{"prompt":[1,2,3],"max_tokens":%d}`, int64(math.MaxInt64))},
		{"max_tokens 2^63-1 - prompt", c, fmt.Sprintf(`{"prompt":[1,2,3],"max_tokens":%d}`, int64(math.MaxInt64-2))},
		{"max_tokens 2^31", c, `{"prompt":"Hello","max_tokens":2147483648}`},
		{"chat max_tokens 2^63-1", chat, fmt.Sprintf(`{%s,"max_tokens":%d}`, msgs, int64(math.MaxInt64))},
		{"chat max_completion_tokens 2^63-1", chat,
			fmt.Sprintf(`{%s,"max_completion_tokens":%d}`, msgs, int64(math.MaxInt64))},
		{"chat max_completion_tokens 2^63-1, stream", chat,
			fmt.Sprintf(`{%s,"max_completion_tokens":%d,"stream":true}`, msgs, int64(math.MaxInt64))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := post(t, ss.Server, tt.path, tt.body)
			checkErrorBody(t, resp, body, 400, "max_tokens", "context_length_exceeded")
		})
	}
	// The server still serves.
	resp, body := post(t, ss.Server, c, `{"prompt":"Hello","max_tokens":2}`)
	if resp.StatusCode != 200 {
		t.Fatalf("after the huge requests: %d %s", resp.StatusCode, body)
	}
}

// TestHugeTopKIsOff: top_k at or past the vocabulary keeps every token, and
// reaches the engine as off (-1), never as a number the CUDA device narrows
// to int32 (2^32+1 would become 1: greedy).
func TestHugeTopKIsOff(t *testing.T) {
	eng := newFakeEngine(t, script)
	s := startServer(t, eng)
	for _, topK := range []int64{50257, 1<<32 + 1, math.MaxInt64} {
		resp, body := post(t, s, "/v1/completions", fmt.Sprintf(`{"prompt":"x","max_tokens":1,"top_k":%d}`, topK))
		if resp.StatusCode != 200 {
			t.Fatalf("top_k %d: %d %s", topK, resp.StatusCode, body)
		}
		if got := eng.lastRequest().Params.TopK; got != -1 {
			t.Errorf("top_k %d reached the engine as %d, want -1 (off)", topK, got)
		}
	}
	post(t, s, "/v1/completions", `{"prompt":"x","max_tokens":1,"top_k":50256}`)
	if got := eng.lastRequest().Params.TopK; got != 50256 {
		t.Errorf("top_k 50256 reached the engine as %d", got)
	}
}
