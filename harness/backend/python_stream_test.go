package backend

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roseinfer/roseinfer/harness/client"
)

// fixtureServer answers /v1/completions with a recorded body. The client
// tests (harness/client) cover each quirk alone; these fixtures are whole
// streams in each server's wire format (vLLM's, SGLang's and TensorRT-LLM's
// OpenAI-compatible completions, llama-server's), bytes as sent.
func fixtureServer(t *testing.T, status int, contentType, file string) *httptest.Server {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestStreamFixtures(t *testing.T) {
	cases := []struct {
		name, file   string
		status       int
		quirks       client.Quirks
		chunkTokens  []int
		source       client.CountSource
		finish       string
		usagePrompt  int
		usageOutput  int
		errKind, err string
	}{
		// Merged deltas (3 and 2 tokens in one event), a token with empty
		// text (partial UTF-8), finish on the last content chunk, then the
		// choices:[] usage chunk.
		{"vllm multi-token chunks", "vllm_stream.sse", 200, vllmQuirks, []int{1, 3, 1, 2}, client.CountUsage, "length", 4, 7, "", ""},
		// An error after the stream started, then [DONE].
		{"vllm error in stream", "vllm_stream_error.sse", 200, vllmQuirks, []int{1}, client.CountUsage, "", 4, 1, client.ErrServer, "EngineCore encountered an issue"},
		// --stream-interval style chunks (2 and 3 tokens), matched_stop.
		{"sglang multi-token chunks", "sglang_stream.sse", 200, sglangQuirks, []int{2, 1, 3}, client.CountUsage, "length", 4, 6, "", ""},
		// SGLang's flat error body inside the stream, no [DONE].
		{"sglang flat error in stream", "sglang_stream_flat_error.sse", 200, sglangQuirks, []int{1}, client.CountUsage, "", 4, 1, client.ErrServer, "shutting down"},
		// text_diff of several tokens, a new id per chunk, the final usage
		// chunk typed "chat.completion.chunk" on /v1/completions.
		{"trtllm chat-typed usage chunk", "trtllm_stream.sse", 200, trtllmQuirks, []int{3, 1, 2}, client.CountUsage, "length", 4, 6, "", ""},
		// A field TensorRT-LLM does not declare: HTTP 400 with a flat body.
		{"trtllm flat error body (HTTP 400)", "trtllm_error_400.json", 400, trtllmQuirks, nil, "", "", -1, -1, client.ErrHTTP4xx, "Extra inputs are not permitted"},
		// One token per chunk, usage and timings only in the last chunk.
		{"llama usage in last chunk", "llama_stream.sse", 200, llamaQuirks, []int{1, 1, 1}, client.CountServerTotal, "length", 4, 3, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctype := "text/event-stream"
			if c.status != 200 {
				ctype = "application/json"
			}
			srv := fixtureServer(t, c.status, ctype, c.file)
			body, err := client.BuildBody(client.Params{Model: "gpt2", PromptTokens: []int32{464, 2068, 7586, 21831},
				MaxTokens: 7, Temperature: 0.7, TopP: 0.9, TopK: 50, IgnoreEOS: true}, c.quirks)
			if err != nil {
				t.Fatal(err)
			}
			cl := client.New(client.Options{BaseURL: srv.URL})
			defer cl.Close()
			res := cl.Do(context.Background(), c.quirks.Endpoint, body)
			var tokens []int
			for _, ch := range res.Chunks {
				tokens = append(tokens, ch.Tokens)
			}
			if !slices.Equal(tokens, c.chunkTokens) || res.CountSource != c.source || res.FinishReason != c.finish {
				t.Errorf("chunks %v source %q finish %q, want %v %q %q", tokens, res.CountSource, res.FinishReason,
					c.chunkTokens, c.source, c.finish)
			}
			if res.UsagePromptTokens != c.usagePrompt || res.UsageCompletionTokens != c.usageOutput {
				t.Errorf("usage %d/%d, want %d/%d", res.UsagePromptTokens, res.UsageCompletionTokens, c.usagePrompt, c.usageOutput)
			}
			if res.ErrKind != c.errKind || (c.err != "" && (res.Err == nil || !strings.Contains(res.Err.Error(), c.err))) {
				t.Errorf("error %q %v, want %q containing %q", res.ErrKind, res.Err, c.errKind, c.err)
			}
		})
	}
}

// The request each backend receives: token-id prompt, max_tokens always
// explicit (their defaults are 16, 16, 32 and unlimited), usage asked for
// where the server supports it.
func TestRequestShapes(t *testing.T) {
	p := client.Params{Model: "gpt2", PromptTokens: []int32{464, 2068}, MaxTokens: 32, Temperature: 0.7, TopP: 0.9, TopK: 50, IgnoreEOS: true}
	common := `{"model":"gpt2","prompt":[464,2068],"max_tokens":32,"temperature":0.7,"top_p":0.9,"top_k":50,"ignore_eos":true,"stream":true`
	usage := `,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`
	for _, c := range []struct {
		name   string
		quirks client.Quirks
		want   string
	}{
		{"vllm", vllmQuirks, common + usage},
		{"sglang", sglangQuirks, common + usage},
		{"trtllm", trtllmQuirks, common + usage},
		{"llama", llamaQuirks, common + "}"},
	} {
		got, err := client.BuildBody(p, c.quirks)
		if err != nil || string(got) != c.want {
			t.Errorf("%s:\n got %s %v\nwant %s", c.name, got, err, c.want)
		}
	}
}

// TensorRT-LLM rejects fields its CompletionRequest does not declare
// (extra="forbid"), so every field we send must be in its list
// (tensorrt_llm/serve/openai_protocol.py), also with the other switches a run may
// turn on.
func TestTRTLLMSendsOnlyDeclaredFields(t *testing.T) {
	declared := map[string]bool{}
	for _, f := range strings.Fields(`model prompt max_tokens n best_of echo frequency_penalty presence_penalty
		logit_bias seed stop stream stream_options temperature top_p user lora_request use_beam_search top_k
		top_p_min min_p repetition_penalty length_penalty early_stopping stop_token_ids include_stop_str_in_output
		ignore_eos min_tokens skip_special_tokens spaces_between_special_tokens truncate_prompt_tokens
		return_context_logits detokenize add_special_tokens response_format disaggregated_params`) {
		declared[f] = true
	}
	q := trtllmQuirks
	q.MinTokensEqualMax = true
	body, err := client.BuildBody(client.Params{Model: "gpt2", PromptTokens: []int32{1}, MaxTokens: 4, IgnoreEOS: true}, q)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range fields {
		keys = append(keys, k)
		if !declared[k] {
			t.Errorf("field %q would be rejected by TensorRT-LLM", k)
		}
	}
	sort.Strings(keys)
	var so map[string]any
	json.Unmarshal(fields["stream_options"], &so)
	for k := range so {
		if k != "include_usage" && k != "continuous_usage_stats" {
			t.Errorf("stream_options.%s would be rejected", k)
		}
	}
	if _, ok := fields["max_tokens"]; !ok {
		t.Errorf("max_tokens missing from %v", keys)
	}
}

// SGLang answers /v1/models before its warm-up finished and /health 503
// until then; llama-server answers /health 503 with a JSON body while it
// loads. Readiness waits for /health, and probing stops once ready so no
// probe lands in a measurement.
func TestReadinessWaitsFor503(t *testing.T) {
	for _, c := range []struct {
		name, notReadyBody string
		ready              ReadyRule
	}{
		{"sglang", `{"detail":"Server is starting"}`, SGLangReady},
		{"llama", `{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`, DefaultReady},
	} {
		t.Run(c.name, func(t *testing.T) {
			var health, models atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/health":
					if health.Add(1) <= 3 {
						w.WriteHeader(http.StatusServiceUnavailable)
						w.Write([]byte(c.notReadyBody))
						return
					}
					w.Write([]byte(`{"status":"ok"}`))
				case "/v1/models":
					models.Add(1)
					w.Write([]byte(`{"object":"list","data":[{"id":"gpt2","object":"model"}]}`))
				}
			}))
			defer srv.Close()
			rule := c.ready
			rule.Interval = 10 * time.Millisecond
			s, err := Launch(context.Background(), Spec{Label: c.name, BaseURL: srv.URL, Ready: rule}, LaunchOptions{ReadyTimeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Stop()
			if got := health.Load(); got != 4 {
				t.Errorf("/health probed %d times, want 3 refusals then 1 success", got)
			}
			if models.Load() != 1 || s.ModelID != "gpt2" {
				t.Errorf("/v1/models probed %d times (model %q): it must be asked only after /health is 200", models.Load(), s.ModelID)
			}
			time.Sleep(5 * rule.Interval)
			if got := health.Load(); got != 4 {
				t.Errorf("probing went on after ready: %d /health calls", got)
			}
		})
	}
}
