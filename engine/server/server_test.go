package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/roseinfer/roseinfer/results"
)

const script = " one two three four five six seven eight nine ten"

// completion is a non-streaming response as a client decodes it.
type completion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index        int     `json:"index"`
		Text         string  `json:"text"`
		FinishReason string  `json:"finish_reason"`
		TokenIDs     []int32 `json:"token_ids"`
		Message      *struct {
			Role, Content string
		} `json:"message"`
		Logprobs *struct {
			Tokens        []string   `json:"tokens"`
			TokenLogprobs []*float64 `json:"token_logprobs"`
			TextOffset    []int      `json:"text_offset"`
		} `json:"logprobs"`
	} `json:"choices"`
	Usage        usage                 `json:"usage"`
	ServerTiming *results.ServerTiming `json:"server_timing"`
}

func decodeCompletion(t *testing.T, resp *http.Response, body []byte) completion {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var c completion
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return c
}

func TestCompletionNonStreaming(t *testing.T) {
	eng := newFakeEngine(t, script)
	s := startServer(t, eng)
	tok := testTokenizer(t)
	resp, body := post(t, s, "/v1/completions", `{"model":"gpt2","prompt":"Hello","max_tokens":5,"temperature":0}`)
	c := decodeCompletion(t, resp, body)
	want := eng.script[:5]
	if c.Object != "text_completion" || c.Model != "gpt2" || !strings.HasPrefix(c.ID, "cmpl-") {
		t.Errorf("envelope: %+v", c)
	}
	if len(c.Choices) != 1 || c.Choices[0].Text != tok.Decode(want) || !slices.Equal(c.Choices[0].TokenIDs, want) ||
		c.Choices[0].FinishReason != "length" {
		t.Errorf("choice: %+v, want text %q ids %v", c.Choices, tok.Decode(want), want)
	}
	wantUsage := usage{len(tok.Encode("Hello")), 5, len(tok.Encode("Hello")) + 5, &promptTokensDetails{}}
	if !reflect.DeepEqual(c.Usage, wantUsage) {
		t.Errorf("usage %+v, want %+v", c.Usage, wantUsage)
	}
	if c.ServerTiming != nil {
		t.Errorf("server_timing without asking: %+v", c.ServerTiming)
	}
	req := eng.lastRequest()
	if req.MaxTokens != 5 || req.Params.Temperature != 0 || req.Params.TopP != 1 || req.Params.TopK != -1 || req.HasSeed {
		t.Errorf("engine request: %+v", req)
	}
}

func TestCompletionStreaming(t *testing.T) {
	eng := newFakeEngine(t, script)
	s := startServer(t, eng)
	tok := testTokenizer(t)
	for _, continuous := range []bool{false, true} {
		t.Run(fmt.Sprint("continuous=", continuous), func(t *testing.T) {
			body := fmt.Sprintf(`{"prompt":"Hello","max_tokens":7,"stream":true,
				"stream_options":{"include_usage":true,"continuous_usage_stats":%v}}`, continuous)
			resp, raw := post(t, s, "/v1/completions", body)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("status %d, content type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
			}
			chunks := parseSSE(t, raw)
			text, tokens, finish := streamTotals(chunks)
			if text[0] != tok.Decode(eng.script[:7]) || !slices.Equal(tokens[0], eng.script[:7]) || finish[0] != "length" {
				t.Errorf("stream carried %q %v %q", text[0], tokens[0], finish[0])
			}
			last := chunks[len(chunks)-1]
			numPrompt := len(tok.Encode("Hello"))
			if len(last.Choices) != 0 || last.Usage == nil || !reflect.DeepEqual(*last.Usage, usage{numPrompt, 7, numPrompt + 7, &promptTokensDetails{}}) {
				t.Errorf("usage chunk: %s", last.raw)
			}
			id := chunks[0].ID
			for i, c := range chunks[:len(chunks)-1] {
				if c.ID != id || c.Object != "text_completion" || len(c.Choices) != 1 {
					t.Errorf("chunk %d: %s", i, c.raw)
				}
				if continuous && c.Usage == nil {
					t.Errorf("chunk %d lacks continuous usage: %s", i, c.raw)
				}
				if continuous && c.Usage != nil && c.Usage.PromptTokensDetails != nil {
					t.Errorf("chunk %d: prompt_tokens_details belongs in the final usage only: %s", i, c.raw)
				}
				if !continuous && (c.Usage != nil || !strings.Contains(string(c.raw), `"usage":null`)) {
					t.Errorf("chunk %d: want usage null: %s", i, c.raw)
				}
				if len(c.Choices[0].TokenIDs) == 0 {
					t.Errorf("chunk %d carries no tokens: %s", i, c.raw)
				}
			}
		})
	}
}

// TestStreamInterval: the first token goes out alone at once; later chunks
// carry at least --stream-interval tokens (more when the writer lags).
func TestStreamInterval(t *testing.T) {
	eng := newFakeEngine(t, script)
	eng.tokenDelay = time.Millisecond
	s := startServer(t, eng, func(c *Config) { c.StreamInterval = 4 })
	_, raw := post(t, s, "/v1/completions", `{"prompt":"Hi","max_tokens":13,"stream":true}`)
	chunks := parseSSE(t, raw)
	_, tokens, finish := streamTotals(chunks)
	if len(tokens[0]) != 13 || finish[0] != "length" {
		t.Fatalf("tokens %v finish %q", tokens[0], finish[0])
	}
	if n := len(chunks[0].Choices[0].TokenIDs); n < 1 {
		t.Errorf("first chunk has %d tokens", n)
	}
	for i, c := range chunks[1 : len(chunks)-1] {
		if n := len(c.Choices[0].TokenIDs); n < 4 {
			t.Errorf("chunk %d has %d tokens, want >= 4", i+1, n)
		}
	}
	if len(chunks) > 1+3+1 {
		t.Errorf("%d chunks for 13 tokens at interval 4", len(chunks))
	}
}

func TestTokenIDPromptAndBatch(t *testing.T) {
	eng := newFakeEngine(t, script)
	s := startServer(t, eng)
	resp, body := post(t, s, "/v1/completions", `{"prompt":[15496, 11, 995],"max_tokens":2}`)
	c := decodeCompletion(t, resp, body)
	if got := eng.lastRequest().PromptTokens; !slices.Equal(got, []int32{15496, 11, 995}) || c.Usage.PromptTokens != 3 {
		t.Errorf("engine got prompt %v, usage %+v", got, c.Usage)
	}

	resp, body = post(t, s, "/v1/completions", `{"prompt":["Hello", [1,2,3,4]],"max_tokens":3}`)
	c = decodeCompletion(t, resp, body)
	if len(c.Choices) != 2 || c.Choices[0].Index != 0 || c.Choices[1].Index != 1 ||
		c.Usage.CompletionTokens != 6 || c.Usage.PromptTokens != 1+4 {
		t.Errorf("batch: %s", body)
	}

	_, raw := post(t, s, "/v1/completions", `{"prompt":[[1],[2],[3]],"max_tokens":4,"stream":true,
		"stream_options":{"include_usage":true}}`)
	chunks := parseSSE(t, raw)
	_, tokens, finish := streamTotals(chunks)
	for i := range 3 {
		if len(tokens[i]) != 4 || finish[i] != "length" {
			t.Errorf("choice %d: %v %q", i, tokens[i], finish[i])
		}
	}
	if u := chunks[len(chunks)-1].Usage; u == nil || u.CompletionTokens != 12 || u.PromptTokens != 3 {
		t.Errorf("usage %+v", u)
	}
}

func TestStopStrings(t *testing.T) {
	tests := []struct {
		name, stop, want, finish string
	}{
		{"string", `" four"`, " one two three", "stop"},
		{"list, earliest wins", `["five", " tw"]`, " one", "stop"},
		{"spans tokens", `"o th"`, " one tw", "stop"},
		{"no match", `["zzz"]`, " one two three four five six", "length"},
		{"empty ignored", `""`, " one two three four five six", "length"},
	}
	eng := newFakeEngine(t, script)
	s := startServer(t, eng)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := fmt.Sprintf(`{"prompt":"x","max_tokens":6,"stop":%s}`, tt.stop)
			c := complete(t, s, body)
			if c.Choices[0].Text != tt.want || c.Choices[0].FinishReason != tt.finish {
				t.Errorf("got %q %q, want %q %q", c.Choices[0].Text, c.Choices[0].FinishReason, tt.want, tt.finish)
			}
			_, raw := post(t, s, "/v1/completions", strings.Replace(body, "{", `{"stream":true,`, 1))
			text, _, finish := streamTotals(parseSSE(t, raw))
			if text[0] != tt.want || finish[0] != tt.finish {
				t.Errorf("stream got %q %q, want %q %q", text[0], finish[0], tt.want, tt.finish)
			}
		})
	}
}

func post2(t *testing.T, s *Server, body string) (*http.Response, []byte) {
	return post(t, s, "/v1/completions", body)
}

// complete posts a non-streaming completion that must succeed.
func complete(t *testing.T, s *Server, body string) completion {
	t.Helper()
	resp, raw := post2(t, s, body)
	return decodeCompletion(t, resp, raw)
}

// TestStopAbortsEngineRequest: a stop string ends the engine request early.
func TestStopAbortsEngineRequest(t *testing.T) {
	eng := newFakeEngine(t, script)
	eng.tokenDelay = time.Millisecond
	s := startServer(t, eng)
	c := complete(t, s, `{"prompt":"x","max_tokens":500,"stop":" three"}`)
	if c.Choices[0].Text != " one two" || c.Usage.CompletionTokens != 3 {
		t.Errorf("got %q, %d tokens", c.Choices[0].Text, c.Usage.CompletionTokens)
	}
	waitFor(t, func() bool { return eng.Stats().NumRunning == 0 })
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10 s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestEOSAndIgnoreEOS(t *testing.T) {
	eng := newFakeEngine(t, script)
	eng.eosAt = 3
	s := startServer(t, eng)
	c := complete(t, s, `{"prompt":"x","max_tokens":8}`)
	ch := c.Choices[0]
	// EOS is counted and listed but not decoded into the text.
	if ch.FinishReason != "stop" || ch.Text != " one two three" || len(ch.TokenIDs) != 4 || ch.TokenIDs[3] != eng.eos {
		t.Errorf("eos: %+v", ch)
	}
	for _, stream := range []bool{false, true} {
		body := fmt.Sprintf(`{"prompt":"x","max_tokens":8,"ignore_eos":true,"stream":%v}`, stream)
		resp, raw := post2(t, s, body)
		var n int
		if stream {
			_, tokens, _ := streamTotals(parseSSE(t, raw))
			n = len(tokens[0])
		} else {
			n = len(decodeCompletion(t, resp, raw).Choices[0].TokenIDs)
		}
		if n != 8 {
			t.Errorf("stream=%v: ignore_eos gave %d tokens, want 8", stream, n)
		}
	}
}

func TestServerTiming(t *testing.T) {
	eng := newFakeEngine(t, script)
	eng.tokenDelay = time.Millisecond
	s := startServer(t, eng)
	check := func(st *results.ServerTiming, n int) {
		t.Helper()
		if st == nil || len(st.TokenS) != n {
			t.Fatalf("server_timing %+v, want %d tokens", st, n)
		}
		at := []float64{0, st.QueuedS, st.FirstScheduledS}
		at = append(at, st.TokenS...)
		at = append(at, st.FinishedS)
		if !slices.IsSorted(at) {
			t.Errorf("instants out of order: %v", at)
		}
	}
	c := complete(t, s, `{"prompt":"x","max_tokens":4,"return_server_timing":true}`)
	check(c.ServerTiming, 4)

	for _, usageChunk := range []bool{false, true} {
		body := `{"prompt":"x","max_tokens":5,"return_server_timing":true,"stream":true}`
		if usageChunk {
			body = strings.Replace(body, "{", `{"stream_options":{"include_usage":true},`, 1)
		}
		_, raw := post2(t, s, body)
		chunks := parseSSE(t, raw)
		for i, ch := range chunks {
			if has := ch.ServerTiming != nil; has != (i == len(chunks)-1) {
				t.Errorf("chunk %d of %d has server_timing=%v", i, len(chunks), has)
			}
		}
		var st results.ServerTiming
		if err := json.Unmarshal(chunks[len(chunks)-1].ServerTiming, &st); err != nil {
			t.Fatal(err)
		}
		check(&st, 5)
	}
}

func TestLogprobs(t *testing.T) {
	eng := newFakeEngine(t, script)
	s := startServer(t, eng)
	c := complete(t, s, `{"prompt":"x","max_tokens":3,"logprobs":0}`)
	lp := c.Choices[0].Logprobs
	if lp == nil || !slices.Equal(lp.Tokens, []string{" one", " two", " three"}) ||
		!slices.Equal(lp.TextOffset, []int{0, 4, 8}) || len(lp.TokenLogprobs) != 3 || *lp.TokenLogprobs[0] != -0.5 {
		t.Errorf("logprobs %+v", lp)
	}
	_, raw := post2(t, s, `{"prompt":"x","max_tokens":3,"logprobs":1,"stream":true}`)
	var tokens []string
	for _, ch := range parseSSE(t, raw) {
		tokens = append(tokens, ch.Choices[0].Logprobs.Tokens...)
	}
	if !slices.Equal(tokens, []string{" one", " two", " three"}) {
		t.Errorf("streamed logprob tokens %q", tokens)
	}
}

func TestChatCompletions(t *testing.T) {
	eng := newFakeEngine(t, script)
	s := startServer(t, eng)
	tok := testTokenizer(t)
	msgs := `[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hi"}]}]`
	resp, body := post(t, s, "/v1/chat/completions", `{"model":"gpt2","max_tokens":3,"messages":`+msgs+`}`)
	c := decodeCompletion(t, resp, body)
	if c.Object != "chat.completion" || !strings.HasPrefix(c.ID, "chatcmpl-") || c.Choices[0].Message == nil ||
		c.Choices[0].Message.Role != "assistant" || c.Choices[0].Message.Content != " one two three" {
		t.Errorf("chat: %s", body)
	}
	wantPrompt := tok.Encode("System: Be brief.\nUser: Hi\nAssistant:")
	if got := eng.lastRequest().PromptTokens; !slices.Equal(got, wantPrompt) {
		t.Errorf("template gave %q", tok.Decode(got))
	}
	// Without max_tokens a chat reply may fill the context.
	post(t, s, "/v1/chat/completions", `{"messages":`+msgs+`}`)
	if got := eng.lastRequest().MaxTokens; got != 1024-len(wantPrompt) {
		t.Errorf("default chat max_tokens %d", got)
	}

	_, raw := post(t, s, "/v1/chat/completions", `{"max_tokens":3,"stream":true,"messages":`+msgs+`}`)
	chunks := parseSSE(t, raw)
	first := chunks[0].Choices[0]
	if chunks[0].Object != "chat.completion.chunk" || first.Delta == nil || first.Delta.Role == nil ||
		*first.Delta.Role != "assistant" || len(first.TokenIDs) != 0 {
		t.Errorf("first chat chunk: %s", chunks[0].raw)
	}
	text, tokens, finish := streamTotals(chunks)
	if text[0] != " one two three" || len(tokens[0]) != 3 || finish[0] != "length" {
		t.Errorf("chat stream: %q %v %q", text[0], tokens[0], finish[0])
	}
}

func TestModelsHealthMetrics(t *testing.T) {
	eng := newFakeEngine(t, script)
	s := startServer(t, nil, func(c *Config) { c.ModelName = "tiny-gpt2" })

	get := func(path string) (int, string) {
		resp, err := http.Get(s.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/health"); code != 503 || !strings.Contains(body, "starting") {
		t.Errorf("health while starting: %d %s", code, body)
	}
	resp, body := post(t, s, "/v1/completions", `{"prompt":"x"}`)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "model_loading") {
		t.Errorf("completion while starting: %d %s", resp.StatusCode, body)
	}
	s.SetEngine(eng)
	if code, body := get("/health"); code != 200 || strings.TrimSpace(body) != `{"status":"ok"}` {
		t.Errorf("health: %d %s", code, body)
	}
	if code, body := get("/v1/models"); code != 200 || !strings.Contains(body, `"id":"tiny-gpt2"`) ||
		!strings.Contains(body, `"object":"list"`) {
		t.Errorf("models: %d %s", code, body)
	}
	post(t, s, "/v1/completions", `{"prompt":"x","max_tokens":3}`)
	code, metrics := get("/metrics")
	for _, name := range []string{"roseinfer_num_requests_running", "roseinfer_num_requests_waiting",
		"roseinfer_kv_blocks_used", "roseinfer_kv_blocks_free", "roseinfer_prefix_cache_hit_rate",
		"roseinfer_time_to_first_token_seconds_bucket", "roseinfer_inter_token_latency_seconds_bucket",
		"roseinfer_e2e_request_latency_seconds_bucket", "roseinfer_request_queue_time_seconds_bucket",
		"roseinfer_prompt_tokens_total 1", "roseinfer_generation_tokens_total 3", "go_gc_duration_seconds",
		"go_sched_pauses_total_gc_seconds_bucket", `roseinfer_requests_total{finish_reason="length"} 1`,
		`roseinfer_request_errors_total{status="503"} 1`} {
		if code != 200 || !strings.Contains(metrics, name) {
			t.Errorf("/metrics lacks %q", name)
		}
	}
}
