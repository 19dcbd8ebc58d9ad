package client

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// write is one flush of a fixture stream, after an optional pause.
type write struct {
	pause time.Duration
	data  string
}

// streamServer answers every request with status and the given writes,
// flushing after each; it records the last request body.
func streamServer(t testing.TB, status int, writes []write) (*httptest.Server, *[]byte) {
	t.Helper()
	var lastBody []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lastBody, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(status)
		rc := http.NewResponseController(w)
		rc.Flush()
		for _, wr := range writes {
			time.Sleep(wr.pause)
			if _, err := io.WriteString(w, wr.data); err != nil {
				return
			}
			rc.Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &lastBody
}

func data(s string) write { return write{data: "data: " + s + "\n\n"} }

func TestStreamQuirks(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		writes     []write
		countFn    func(string) int
		wantTokens []int
		wantText   string
		wantSource CountSource
		wantKind   string
		wantFinish string
		wantUsage  int
	}{
		{
			// roseinfer / vLLM with continuous_usage_stats: usage grows by one
			// per chunk, then a finish-only chunk and a usage-only chunk.
			name: "continuous usage one token per chunk",
			writes: []write{
				data(`{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":"Hel","finish_reason":null}],"usage":{"prompt_tokens":4,"completion_tokens":1,"total_tokens":5}}`),
				data(`{"id":"cmpl-1","choices":[{"index":0,"text":"lo","finish_reason":null}],"usage":{"prompt_tokens":4,"completion_tokens":2,"total_tokens":6}}`),
				data(`{"id":"cmpl-1","choices":[{"index":0,"text":"","finish_reason":"length"}],"usage":{"prompt_tokens":4,"completion_tokens":2,"total_tokens":6}}`),
				data(`{"id":"cmpl-1","choices":[],"usage":{"prompt_tokens":4,"completion_tokens":2,"total_tokens":6}}`),
				data(`[DONE]`),
			},
			wantTokens: []int{1, 1}, wantText: "Hello", wantSource: CountUsage, wantFinish: "length", wantUsage: 2,
		},
		{
			// vLLM merges deltas when the client lags: usage jumps by several.
			name: "continuous usage multi-token chunks",
			writes: []write{
				data(`{"choices":[{"text":"a","finish_reason":null}],"usage":{"completion_tokens":1}}`),
				data(`{"choices":[{"text":"bcd","finish_reason":null}],"usage":{"completion_tokens":4}}`),
				data(`{"choices":[{"text":"ef","finish_reason":"stop"}],"usage":{"completion_tokens":6}}`),
				data(`[DONE]`),
			},
			wantTokens: []int{1, 3, 2}, wantText: "abcdef", wantSource: CountUsage, wantFinish: "stop", wantUsage: 6,
		},
		{
			// vLLM return_token_ids: an empty-text delta (partial UTF-8) still
			// carries a token; usage only at the end.
			name: "token ids including empty text",
			writes: []write{
				data(`{"choices":[{"text":"x","token_ids":[11,12],"finish_reason":null,"logprobs":null,"stop_reason":null}],"usage":null}`),
				data(`{"choices":[{"text":"","token_ids":[13],"finish_reason":null}],"usage":null}`),
				data(`{"choices":[{"text":"é","token_ids":[14],"finish_reason":"length"}],"usage":null}`),
				data(`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`),
				data(`[DONE]`),
			},
			wantTokens: []int{2, 1, 1}, wantText: "xé", wantSource: CountTokenIDs, wantFinish: "length", wantUsage: 4,
		},
		{
			// TRT-LLM: chunk ids change, the final usage chunk is typed as a
			// chat chunk even on /v1/completions.
			name: "trtllm chat-typed usage chunk",
			writes: []write{
				data(`{"id":"cmpl-a","object":"text_completion","choices":[{"index":0,"text":"ab","finish_reason":null}],"usage":{"prompt_tokens":2,"completion_tokens":2,"total_tokens":4}}`),
				data(`{"id":"cmpl-b","object":"text_completion","choices":[{"index":0,"text":"c","finish_reason":"length"}],"usage":{"prompt_tokens":2,"completion_tokens":3,"total_tokens":5}}`),
				data(`{"id":"chatcmpl-z","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":2,"completion_tokens":3,"total_tokens":5}}`),
				data(`[DONE]`),
			},
			wantTokens: []int{2, 1}, wantText: "abc", wantSource: CountUsage, wantFinish: "length", wantUsage: 3,
		},
		{
			// llama-server: usage and timings only in the last content chunk;
			// the total equals the number of text chunks, so one each.
			name: "usage in last chunk only equals chunk count",
			writes: []write{
				data(`{"choices":[{"text":"a","index":0,"finish_reason":null}]}`),
				data(`{"choices":[{"text":"b","index":0,"finish_reason":null}]}`),
				data(`{"choices":[{"text":"c","index":0,"finish_reason":"length"}],"usage":{"completion_tokens":3,"prompt_tokens":5},"timings":{"predicted_n":3}}`),
				data(`[DONE]`),
			},
			wantTokens: []int{1, 1, 1}, wantText: "abc", wantSource: CountServerTotal, wantFinish: "length", wantUsage: 3,
		},
		{
			// Text only and a total that does not match the chunk count: the
			// tokenizer hook counts each chunk.
			name: "text only with tokenizer hook",
			writes: []write{
				data(`{"choices":[{"text":"one two","finish_reason":null}]}`),
				data(`{"choices":[{"text":" three","finish_reason":"stop"}],"usage":{"completion_tokens":3}}`),
				data(`[DONE]`),
			},
			countFn:    func(s string) int { return len(strings.Fields(s)) },
			wantTokens: []int{2, 1}, wantText: "one two three", wantSource: CountTokenizer, wantFinish: "stop", wantUsage: 3,
		},
		{
			name: "text only without any count",
			writes: []write{
				data(`{"choices":[{"text":"one two","finish_reason":null}]}`),
				data(`{"choices":[{"text":" three","finish_reason":null}]}`),
				data(`[DONE]`),
			},
			wantTokens: []int{1, 1}, wantText: "one two three", wantSource: CountChunks, wantUsage: -1,
		},
		{
			// Chat: a role-only opener and a null-content closer are not tokens.
			name: "chat deltas",
			writes: []write{
				data(`{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":{"completion_tokens":0}}`),
				data(`{"choices":[{"index":0,"delta":{"role":null,"content":"Hi"},"finish_reason":null}],"usage":{"completion_tokens":1}}`),
				data(`{"choices":[{"index":0,"delta":{"content":" there"},"finish_reason":null}],"usage":{"completion_tokens":3}}`),
				data(`{"choices":[{"index":0,"delta":{"role":null,"content":null},"finish_reason":"stop"}],"usage":{"completion_tokens":3}}`),
				data(`[DONE]`),
			},
			wantTokens: []int{1, 2}, wantText: "Hi there", wantSource: CountUsage, wantFinish: "stop", wantUsage: 3,
		},
		{
			// SSE variations: comments, event:/id: fields, CRLF, no space after
			// "data:", a missing blank line between two events, no [DONE] but
			// a finish_reason then close.
			name: "sse framing variations",
			writes: []write{
				{data: ": keep-alive\r\n\r\n"},
				{data: "event: message\r\nid: 7\r\ndata:{\"choices\":[{\"text\":\"a\"}],\"usage\":{\"completion_tokens\":1}}\r\n\r\n"},
				{data: "data: {\"choices\":[{\"text\":\"b\"}],\"usage\":{\"completion_tokens\":2}}\n"},
				{data: "data: {\"choices\":[{\"text\":\"c\",\"finish_reason\":\"length\"}],\"usage\":{\"completion_tokens\":3}}\n\n"},
			},
			wantTokens: []int{1, 1, 1}, wantText: "abc", wantSource: CountUsage, wantFinish: "length", wantUsage: 3,
		},
		{
			// A chunk longer than the 64 KiB read buffer (logprobs).
			name: "line longer than the read buffer",
			writes: []write{
				data(`{"choices":[{"text":"a","logprobs":{"pad":"` + strings.Repeat("x", 200<<10) + `"}}],"usage":{"completion_tokens":1}}`),
				data(`{"choices":[{"text":"b","finish_reason":"length"}],"usage":{"completion_tokens":2}}`),
				data(`[DONE]`),
			},
			wantTokens: []int{1, 1}, wantText: "ab", wantSource: CountUsage, wantFinish: "length", wantUsage: 2,
		},
		{
			name: "nested error in stream",
			writes: []write{
				data(`{"choices":[{"text":"a"}],"usage":{"completion_tokens":1}}`),
				data(`{"error":{"message":"engine died","type":"InternalServerError","param":null,"code":500}}`),
				data(`[DONE]`),
			},
			wantTokens: []int{1}, wantText: "a", wantSource: CountUsage, wantKind: ErrServer, wantUsage: 1,
		},
		{
			name:       "flat error object",
			writes:     []write{data(`{"object":"error","message":"bad","type":"BadRequestError","code":400}`)},
			wantTokens: []int{}, wantKind: ErrServer, wantUsage: -1,
		},
		{
			name:       "stream cut without done or finish",
			writes:     []write{data(`{"choices":[{"text":"a"}],"usage":{"completion_tokens":1}}`)},
			wantTokens: []int{1}, wantText: "a", wantSource: CountUsage, wantKind: ErrStreamBroken, wantUsage: 1,
		},
		{
			name:       "invalid json chunk",
			writes:     []write{data(`{"choices":[{"text":`), data(`[DONE]`)},
			wantTokens: []int{}, wantKind: ErrBadStream, wantUsage: -1,
		},
		{
			name:       "http 400",
			status:     http.StatusBadRequest,
			writes:     []write{{data: `{"error":{"message":"max_tokens too large"}}`}},
			wantTokens: []int{}, wantKind: ErrHTTP4xx, wantUsage: -1,
		},
		{
			name:       "http 503",
			status:     http.StatusServiceUnavailable,
			writes:     []write{{data: `{"detail":"starting"}`}},
			wantTokens: []int{}, wantKind: ErrHTTP5xx, wantUsage: -1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status := tc.status
			if status == 0 {
				status = http.StatusOK
			}
			srv, _ := streamServer(t, status, tc.writes)
			c := New(Options{BaseURL: srv.URL, Timeout: 10 * time.Second, CountTokens: tc.countFn})
			defer c.Close()
			res := c.Do(context.Background(), Completions, []byte(`{}`))
			if res.ErrKind != tc.wantKind {
				t.Fatalf("error kind %q (%v), want %q", res.ErrKind, res.Err, tc.wantKind)
			}
			got := []int{}
			for _, ch := range res.Chunks {
				got = append(got, ch.Tokens)
			}
			if !slices.Equal(got, tc.wantTokens) {
				t.Errorf("tokens per chunk %v, want %v", got, tc.wantTokens)
			}
			if res.Text() != tc.wantText {
				t.Errorf("text %q, want %q", res.Text(), tc.wantText)
			}
			if res.CountSource != tc.wantSource {
				t.Errorf("count source %q, want %q", res.CountSource, tc.wantSource)
			}
			if res.FinishReason != tc.wantFinish {
				t.Errorf("finish reason %q, want %q", res.FinishReason, tc.wantFinish)
			}
			if res.UsageCompletionTokens != tc.wantUsage {
				t.Errorf("usage completion tokens %d, want %d", res.UsageCompletionTokens, tc.wantUsage)
			}
			if res.Status != status {
				t.Errorf("status %d, want %d", res.Status, status)
			}
			checkTimeOrder(t, res)
		})
	}
}

func checkTimeOrder(t *testing.T, res *Result) {
	t.Helper()
	if res.Sent.Before(res.Called) {
		t.Errorf("sent %v before called %v", res.Sent, res.Called)
	}
	prev := res.Sent
	for i, ch := range res.Chunks {
		if ch.At.Before(prev) {
			t.Errorf("chunk %d arrived %v before the previous instant", i, prev.Sub(ch.At))
		}
		prev = ch.At
	}
	if res.End.Before(prev) {
		t.Errorf("end before the last chunk")
	}
}

// Arrival times are taken when bytes arrive, not when the client gets round
// to parsing: a pause on the server shows up as at least that gap.
// Each chunk is stamped when it arrived: after the server wrote it and, the
// writes being pause apart, before the server wrote the next. (Gaps between
// stamps are not compared with pause: a reader woken late for one chunk and
// on time for the next sees a gap a little shorter than the pause.)
func TestChunkArrivalTimesFollowServerPauses(t *testing.T) {
	const pause = 50 * time.Millisecond
	writes := []string{
		"data: {\"choices\":[{\"text\":\"a\"}],\"usage\":{\"completion_tokens\":1}}\n\n",
		"data: {\"choices\":[{\"text\":\"b\"}],\"usage\":{\"completion_tokens\":2}}\n\n",
		"data: {\"choices\":[{\"text\":\"c\",\"finish_reason\":\"length\"}],\"usage\":{\"completion_tokens\":3}}\n\ndata: [DONE]\n\n",
	}
	written := make([]time.Time, len(writes)) // before each write; read after the response ends
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i, data := range writes {
			if i > 0 {
				time.Sleep(pause)
			}
			written[i] = time.Now()
			io.WriteString(w, data)
			rc.Flush()
		}
	}))
	defer srv.Close()
	c := New(Options{BaseURL: srv.URL})
	defer c.Close()
	res := c.Do(context.Background(), Completions, []byte(`{}`))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if len(res.Chunks) != 3 {
		t.Fatalf("%d chunks, want 3", len(res.Chunks))
	}
	for i, ck := range res.Chunks {
		if ck.At.Before(written[i]) {
			t.Errorf("chunk %d stamped %v before the server wrote it", i, written[i].Sub(ck.At))
		}
		if i+1 < len(written) && !ck.At.Before(written[i+1]) {
			t.Errorf("chunk %d stamped %v after the server wrote the next one", i, ck.At.Sub(written[i+1]))
		}
	}
	// [DONE] came in the same write as the last chunk: same arrival.
	if !res.End.Equal(res.Chunks[2].At) {
		t.Errorf("end %v after last chunk, want equal (same read)", res.End.Sub(res.Chunks[2].At))
	}
}

func TestConnectErrorAndTimeout(t *testing.T) {
	// A port nobody listens on: reserve one, then close it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := New(Options{BaseURL: "http://" + addr})
	res := c.Do(context.Background(), Completions, []byte(`{}`))
	if res.ErrKind != ErrConnect {
		t.Errorf("closed port: kind %q (%v), want %q", res.ErrKind, res.Err, ErrConnect)
	}

	block := make(chan struct{})
	defer close(block)
	srv, _ := streamServer(t, http.StatusOK, []write{
		data(`{"choices":[{"text":"a"}],"usage":{"completion_tokens":1}}`),
	})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush()
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	_ = srv
	c = New(Options{BaseURL: slow.URL, Timeout: 50 * time.Millisecond})
	res = c.Do(context.Background(), Completions, []byte(`{}`))
	if res.ErrKind != ErrTimeout {
		t.Errorf("slow server: kind %q (%v), want %q", res.ErrKind, res.Err, ErrTimeout)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res = c.Do(ctx, Completions, []byte(`{}`))
	if res.ErrKind != ErrCanceled {
		t.Errorf("canceled context: kind %q (%v), want %q", res.ErrKind, res.Err, ErrCanceled)
	}
}

func TestServerTimingAndBody(t *testing.T) {
	srv, body := streamServer(t, http.StatusOK, []write{
		data(`{"choices":[{"text":"a"}],"usage":{"completion_tokens":1}}`),
		data(`{"choices":[{"text":"","finish_reason":"length"}],"usage":{"completion_tokens":1},"server_timing":{"queued_s":0.001,"first_scheduled_s":0.002,"token_s":[0.0125],"finished_s":0.013}}`),
		data(`[DONE]`),
	})
	req, err := BuildBody(Params{Model: "gpt2", PromptTokens: []int32{1, 2, 3}, MaxTokens: 1, Temperature: 0.7, TopP: 0.9, TopK: 50, IgnoreEOS: true}, Roseinfer)
	if err != nil {
		t.Fatal(err)
	}
	c := New(Options{BaseURL: srv.URL})
	res := c.Do(context.Background(), Completions, req)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if res.ServerTiming == nil || res.ServerTiming.FirstScheduledS != 0.002 || len(res.ServerTiming.TokenS) != 1 {
		t.Errorf("server timing %+v", res.ServerTiming)
	}
	var sent map[string]any
	if err := json.Unmarshal(*body, &sent); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"model": "gpt2", "prompt": []any{1.0, 2.0, 3.0}, "max_tokens": 1.0, "temperature": 0.7, "top_p": 0.9,
		"top_k": 50.0, "ignore_eos": true, "stream": true,
		"stream_options":       map[string]any{"include_usage": true, "continuous_usage_stats": true},
		"return_server_timing": true,
	}
	gotJSON, _ := json.Marshal(sent)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("body\n got %s\nwant %s", gotJSON, wantJSON)
	}
}

func TestBuildBodyQuirks(t *testing.T) {
	p := Params{Model: "m", PromptTokens: []int32{5}, PromptText: "hi", MaxTokens: 8, Temperature: 0, TopP: 1, TopK: -1, IgnoreEOS: true}
	tests := []struct {
		name   string
		q      Quirks
		p      Params
		want   string
		hasErr bool
	}{
		{"plain openai subset", Quirks{}, p,
			`{"model":"m","prompt":"hi","max_tokens":8,"temperature":0,"top_p":1,"stream":true}`, false},
		{"token ids with min tokens", Quirks{PromptAsTokenIDs: true, ExtraSampling: true, MinTokensEqualMax: true}, p,
			`{"model":"m","prompt":[5],"max_tokens":8,"temperature":0,"top_p":1,"top_k":-1,"ignore_eos":true,"min_tokens":8,"stream":true}`, false},
		{"chat", Quirks{Endpoint: ChatCompletions, IncludeUsage: true}, p,
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":8,"temperature":0,"top_p":1,"stream":true,"stream_options":{"include_usage":true}}`, false},
		{"vllm token ids", Quirks{PromptAsTokenIDs: true, ReturnTokenIDs: true}, p,
			`{"model":"m","prompt":[5],"max_tokens":8,"temperature":0,"top_p":1,"stream":true,"return_token_ids":true}`, false},
		{"zero max tokens", Quirks{}, Params{Model: "m", PromptText: "x"}, "", true},
		{"empty id prompt", Quirks{PromptAsTokenIDs: true}, Params{Model: "m", MaxTokens: 1}, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := BuildBody(tc.p, tc.q)
			if (err != nil) != tc.hasErr {
				t.Fatalf("error %v, want error %v", err, tc.hasErr)
			}
			if string(got) != tc.want {
				t.Errorf("\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}
