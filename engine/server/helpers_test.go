package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// startServer runs a real server on a loopback port with eng plugged in
// (nil: still starting).
func startServer(t testing.TB, eng Engine, modify ...func(*Config)) *Server {
	t.Helper()
	cfg := Config{Addr: "127.0.0.1:0", MaxModelLen: 1024, VocabSize: 50257, Tokenizer: testTokenizer(t)}
	for _, m := range modify {
		m(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	if eng != nil {
		s.SetEngine(eng)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

// post sends body to path and returns the response with its body read.
func post(t testing.TB, s *Server, path, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Post(s.URL()+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// testChunk is a streamed chunk as a client decodes it.
type testChunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index        int     `json:"index"`
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
		TokenIDs     []int32 `json:"token_ids"`
		Delta        *struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		Logprobs *struct {
			Tokens        []string   `json:"tokens"`
			TokenLogprobs []*float64 `json:"token_logprobs"`
			TextOffset    []int      `json:"text_offset"`
		} `json:"logprobs"`
	} `json:"choices"`
	Usage        *usage                          `json:"usage"`
	ServerTiming json.RawMessage                 `json:"server_timing"`
	Error        *struct{ Message, Type string } `json:"error"`
	raw          []byte
}

// parseSSE checks the framing strictly — every event is exactly
// "data: <payload>\n\n" and the last is [DONE] — and decodes the chunks.
func parseSSE(t testing.TB, body []byte) []testChunk {
	t.Helper()
	if !bytes.HasSuffix(body, []byte("data: [DONE]\n\n")) {
		t.Fatalf("stream does not end with [DONE]: %q", tail(body))
	}
	var chunks []testChunk
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	expectBlank := false
	done := false
	for sc.Scan() {
		line := sc.Bytes()
		if expectBlank {
			if len(line) != 0 {
				t.Fatalf("event not followed by a blank line: %q", line)
			}
			expectBlank = false
			continue
		}
		if done {
			t.Fatalf("data after [DONE]: %q", line)
		}
		payload, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok {
			t.Fatalf("line without data prefix: %q", line)
		}
		expectBlank = true
		if string(payload) == "[DONE]" {
			done = true
			continue
		}
		var c testChunk
		if err := json.Unmarshal(payload, &c); err != nil {
			t.Fatalf("chunk is not JSON: %v: %s", err, payload)
		}
		c.raw = append([]byte(nil), payload...)
		chunks = append(chunks, c)
	}
	return chunks
}

func tail(b []byte) []byte { return b[max(0, len(b)-200):] }

// streamTotals sums text and tokens per choice index over content chunks.
func streamTotals(chunks []testChunk) (text map[int]string, tokens map[int][]int32, finish map[int]string) {
	text, tokens, finish = map[int]string{}, map[int][]int32{}, map[int]string{}
	for _, c := range chunks {
		for _, ch := range c.Choices {
			text[ch.Index] += ch.Text
			if ch.Delta != nil && ch.Delta.Content != nil {
				text[ch.Index] += *ch.Delta.Content
			}
			tokens[ch.Index] = append(tokens[ch.Index], ch.TokenIDs...)
			if ch.FinishReason != nil {
				finish[ch.Index] = *ch.FinishReason
			}
		}
	}
	return text, tokens, finish
}
