package server

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"testing"
)

// FuzzCompletionsHandler feeds arbitrary bodies to the generation handlers
// (decoder, validation, tokenizer, the receive loop and both encoders) and
// checks that every answer is well formed: a documented error status with an
// OpenAI error body, or a 200 whose JSON or SSE stream is valid and whose
// token counts agree. The handlers run without the panic guard, so a panic
// fails the fuzz run. The engine is the instant fake: the server is what is
// under test.
//
// CI runs the seeds as a normal test; run longer with
//
//	go test ./engine/server -run '^$' -fuzz FuzzCompletionsHandler -fuzztime 1000000x
func FuzzCompletionsHandler(f *testing.F) {
	for _, seed := range []string{
		`{"model":"gpt2","prompt":"Hello","max_tokens":8}`,
		`{"prompt":"Hello","max_tokens":8,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`,
		`{"prompt":[15496,11,995],"max_tokens":3,"stop":[" two","x"],"logprobs":1}`,
		`{"prompt":[[1,2],[3]],"max_tokens":2,"stream":true,"return_server_timing":false}`,
		`{"prompt":["a","b"],"max_tokens":2,"stream":true,"stop":"o"}`,
		`{"prompt":"x","max_tokens":5,"ignore_eos":true,"min_tokens":5,"seed":-3,"temperature":0.5,"top_p":0.9,"top_k":40}`,
		`{"prompt":"x","max_tokens":4,"stream":true,"return_server_timing":true}`,
		`{"prompt":"\u00e9\ud83e\udd16","stop":"\ud83e"}`,
		`{"prompt":"x","max_tokens":1024}`,
		`{"prompt":[50257]}`,
		`{"prompt":`,
		`[]`,
		`{"messages":[{"role":"user","content":"Hi"}],"max_tokens":3,"stream":true}`,
		`{"messages":[{"role":"system","content":[{"type":"text","text":"S"}]}],"max_completion_tokens":2}`,
		`{"messages":[{"role":"user"}],"max_tokens":2,"stop":["e"]}`,
		`{"messages":[{"role":"user","content":"Hi"}],"chat_template_kwargs":{"enable_thinking":false,"x":{}}}`,
		`{"messages":[{"role":"assistant","content":"<think>r</think>a","reasoning_content":null}],"tools":[]}`,
		`{"messages":[{"role":"user","content":"Hi","tool_calls":[{}]}],"chat_template_kwargs":{"enable_thinking":1}}`,
	} {
		f.Add(false, []byte(seed))
		f.Add(true, []byte(seed))
	}
	// Every integer field at the int64 limits and around them: lengths
	// meet the context in arithmetic (prompt + max_tokens once wrapped
	// negative) and size allocations.
	for _, field := range []string{"max_tokens", "max_completion_tokens", "min_tokens", "n", "top_k", "seed",
		"logprobs", "top_logprobs", "best_of"} {
		for _, v := range []string{"9223372036854775807", "-9223372036854775808", "2147483648", "-1", "0"} {
			f.Add(false, []byte(`{"prompt":"Hello","`+field+`":`+v+`}`))
			f.Add(true, []byte(`{"messages":[{"role":"user","content":"Hi"}],"`+field+`":`+v+`}`))
		}
	}
	f.Add(false, []byte(`{"prompt":[1,2,3],"max_tokens":9223372036854775806,"min_tokens":9223372036854775807}`))
	f.Add(true, []byte(`{"messages":[{"role":"user","content":"Hi"}],"max_tokens":1,"max_completion_tokens":9223372036854775807}`))
	eng := newFakeEngine(f, script)
	eng.eosAt = 6
	s, err := New(Config{MaxModelLen: 1024, VocabSize: 50257, Tokenizer: testTokenizer(f), MaxBodyBytes: 1 << 16,
		StreamInterval: 2})
	if err != nil {
		f.Fatal(err)
	}
	s.SetEngine(eng)
	mux := s.mux()
	f.Fuzz(func(t *testing.T, chat bool, body []byte) {
		path := "/v1/completions"
		if chat {
			path = "/v1/chat/completions"
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("POST", path, bytes.NewReader(body)))
		resp := rec.Result()
		switch resp.StatusCode {
		case 200:
		case 400, 404, 413:
			checkFuzzError(t, rec)
			return
		default:
			t.Fatalf("status %d for %q: %s", resp.StatusCode, body, rec.Body.Bytes())
		}
		if resp.Header.Get("Content-Type") == "text/event-stream" {
			checkFuzzStream(t, rec.Body.Bytes())
			return
		}
		var c completion
		if err := json.Unmarshal(rec.Body.Bytes(), &c); err != nil {
			t.Fatalf("response is not JSON: %v: %s", err, rec.Body.Bytes())
		}
		numTokens := 0
		for _, ch := range c.Choices {
			numTokens += len(ch.TokenIDs)
		}
		if len(c.Choices) == 0 || numTokens != c.Usage.CompletionTokens {
			t.Fatalf("usage %+v for %d tokens: %s", c.Usage, numTokens, rec.Body.Bytes())
		}
	})
}

func checkFuzzError(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	var b errorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || b.Error.Message == "" || b.Error.Type == "" {
		t.Fatalf("bad error body %v: %s", err, rec.Body.Bytes())
	}
}

func checkFuzzStream(t *testing.T, raw []byte) {
	t.Helper()
	chunks := parseSSE(t, raw)
	_, tokens, finish := streamTotals(chunks)
	numTokens := 0
	for i, ids := range tokens {
		numTokens += len(ids)
		if finish[i] == "" {
			t.Fatalf("choice %d has no finish_reason: %s", i, raw)
		}
	}
	if last := chunks[len(chunks)-1]; len(last.Choices) == 0 && last.Usage != nil &&
		last.Usage.CompletionTokens != numTokens {
		t.Fatalf("usage %+v for %d streamed tokens", last.Usage, numTokens)
	}
}
