package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/engine"
)

// TestE2ECachedTokens: usage.prompt_tokens_details.cached_tokens is the
// engine's prefix-cache hit count, in the final usage of completions and
// chat, streaming or not. A prompt sent a second time finds every whole
// 16-token block but the one holding its last token; the first time, and
// always without a prefix cache, it finds none.
func TestE2ECachedTokens(t *testing.T) {
	ids := make([]string, 100) // 6 whole blocks and 4 tokens
	for i := range ids {
		ids[i] = fmt.Sprint(1000 + i)
	}
	prompt := "[" + strings.Join(ids, ",") + "]"
	// The chat prompt renders to fewer than 100 tokens; its hit is what its
	// whole blocks allow, checked against the engine's own counter.
	chatText := strings.Repeat("the same words again ", 20)
	for _, cached := range []bool{true, false} {
		t.Run(fmt.Sprint("prefix_cache=", cached), func(t *testing.T) {
			ss := startSimServer(t, 0, func(c *engine.Config) { c.PrefixCache = cached })
			want := func(second bool, numPrompt int) int {
				if !cached || !second {
					return 0
				}
				return (numPrompt - 1) / 16 * 16
			}
			for round, second := range []bool{false, true} {
				// Non-streaming completion.
				c := complete(t, ss.Server, `{"prompt":`+prompt+`,"max_tokens":2}`)
				checkCached(t, "completion", round, c.Usage, want(second, 100))

				// Streaming completion of the same prompt, always its second
				// time: the final usage chunk carries the count.
				_, raw := post(t, ss.Server, "/v1/completions", `{"prompt":`+prompt+`,"max_tokens":2,"stream":true,
					"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`)
				chunks := parseSSE(t, raw)
				last := chunks[len(chunks)-1]
				if last.Usage == nil {
					t.Fatalf("no usage chunk: %s", raw)
				}
				checkCached(t, "streamed completion", round, *last.Usage, want(true, 100))

				// Chat, streaming (the first chat request of the round).
				body := fmt.Sprintf(`{"messages":[{"role":"user","content":%q}],"max_tokens":2,"stream":true,
					"stream_options":{"include_usage":true}}`, chatText)
				_, raw = post(t, ss.Server, "/v1/chat/completions", body)
				chunks = parseSSE(t, raw)
				u := chunks[len(chunks)-1].Usage
				if u == nil {
					t.Fatalf("no chat usage chunk: %s", raw)
				}
				checkCached(t, "streamed chat", round, *u, want(second, u.PromptTokens))
			}
			if st := ss.eng.Stats(); cached && st.PrefixHitTokens == 0 {
				t.Errorf("engine counted no prefix hits: %+v", st)
			}
			ss.waitIdle(t)
		})
	}
}

func checkCached(t *testing.T, what string, round int, u usage, want int) {
	t.Helper()
	if u.PromptTokensDetails == nil {
		raw, _ := json.Marshal(u)
		t.Errorf("%s (round %d): usage without prompt_tokens_details: %s", what, round, raw)
		return
	}
	if got := u.PromptTokensDetails.CachedTokens; got != want {
		t.Errorf("%s (round %d): cached_tokens %d, want %d (prompt %d tokens)", what, round, got, want, u.PromptTokens)
	}
}
