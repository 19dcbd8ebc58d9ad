package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/roseinfer/roseinfer/engine"
	"github.com/roseinfer/roseinfer/engine/device/sim"
)

// End-to-end tests: the real engine (scheduler, KV cache) with the sim
// device behind the real server on a loopback port.

const simNumBlocks = 256

type simServer struct {
	*Server
	eng *engine.Engine
	dev *sim.Device
}

func startSimServer(t *testing.T, step time.Duration, modify func(*engine.Config)) simServer {
	t.Helper()
	tok := testTokenizer(t)
	dev, err := sim.New(sim.Options{StepDuration: step, VocabSize: 50257, EOS: tok.EOS()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := engine.Config{NumBlocks: simNumBlocks, MaxModelLen: 1024, EOSToken: tok.EOS(), ChunkedPrefill: true,
		MaxNumBatchedTokens: 1024}
	if modify != nil {
		modify(&cfg)
	}
	eng, err := engine.New(cfg, dev)
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, FromEngine(eng))
	t.Cleanup(func() { _ = eng.Close() }) // runs after the server's Close
	return simServer{s, eng, dev}
}

// waitIdle waits until the engine runs nothing and every KV block is free.
// The engine publishes Stats after each step, and an abort taken in while
// it goes idle runs no step, so each poll first sends a one-token request:
// its step publishes the state (and it frees its own block when it ends).
func (ss simServer) waitIdle(t *testing.T) {
	t.Helper()
	waitFor(t, func() bool {
		post(t, ss.Server, "/v1/completions", `{"prompt":[1],"max_tokens":1}`)
		st := ss.eng.Stats()
		return st.NumRunning == 0 && st.NumWaiting == 0 && st.KVBlocksUsed == 0 && st.KVBlocksFree == simNumBlocks
	})
}

func TestE2ESimExactTokens(t *testing.T) {
	ss := startSimServer(t, 0, nil)
	tok := testTokenizer(t)
	const n, seed = 37, 7
	want := make([]int32, n)
	for i := range want {
		want[i] = ss.dev.Token(seed, i, -1)
	}
	body := fmt.Sprintf(`{"model":"gpt2","prompt":"Hello, world","max_tokens":%d,"ignore_eos":true,"seed":%d,
		"temperature":0.7,"top_p":0.9,"top_k":50,"stream":true,"stream_options":{"include_usage":true}}`, n, seed)
	_, raw := post(t, ss.Server, "/v1/completions", body)
	chunks := parseSSE(t, raw)
	text, tokens, finish := streamTotals(chunks)
	if !slices.Equal(tokens[0], want) || finish[0] != "length" {
		t.Fatalf("streamed %d tokens %v (finish %q), want %v", len(tokens[0]), tokens[0], finish[0], want)
	}
	if text[0] != tok.Decode(want) {
		t.Errorf("text %q, want %q", text[0], tok.Decode(want))
	}
	if u := chunks[len(chunks)-1].Usage; u == nil || u.CompletionTokens != n || u.PromptTokens != 3 {
		t.Errorf("usage %+v", u)
	}

	c := complete(t, ss.Server, strings.Replace(body, `"stream":true,"stream_options":{"include_usage":true}`,
		`"return_server_timing":true`, 1))
	if !slices.Equal(c.Choices[0].TokenIDs, want) || c.Choices[0].Text != text[0] || c.Usage.CompletionTokens != n {
		t.Errorf("non-streaming differs: %+v", c.Choices[0])
	}
	if st := c.ServerTiming; st == nil || len(st.TokenS) != n || st.FinishedS < st.TokenS[n-1] {
		t.Errorf("server timing %+v", st)
	}
	// A token-id prompt is the same request as its text.
	c2 := complete(t, ss.Server, fmt.Sprintf(`{"prompt":[15496,11,995],"max_tokens":%d,"ignore_eos":true,"seed":%d}`,
		n, seed))
	if !slices.Equal(c2.Choices[0].TokenIDs, want) || c2.Usage.PromptTokens != 3 {
		t.Errorf("token-id prompt: %+v %+v", c2.Choices[0].TokenIDs, c2.Usage)
	}
	ss.waitIdle(t)
}

// TestE2EDisconnectFreesBlocks: a client that leaves mid-stream has its
// request aborted and its KV blocks returned.
func TestE2EDisconnectFreesBlocks(t *testing.T) {
	ss := startSimServer(t, 2*time.Millisecond, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := streamRequest(t, ctx, ss.Server, `{"prompt":"Hello","max_tokens":1000,"ignore_eos":true,"stream":true}`)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: {") {
		t.Fatalf("first event %q, %v", line, err)
	}
	waitFor(t, func() bool { st := ss.eng.Stats(); return st.NumRunning == 1 && st.KVBlocksUsed > 0 })
	cancel()
	ss.waitIdle(t)
}

func streamRequest(t *testing.T, ctx context.Context, s *Server, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", s.URL()+"/v1/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	return resp
}

// TestE2EOverloaded: with one running sequence and --max-pending 1 waiting,
// the next request gets 429 and Retry-After.
func TestE2EOverloaded(t *testing.T) {
	ss := startSimServer(t, 2*time.Millisecond, func(c *engine.Config) { c.MaxNumSeqs, c.MaxPending = 1, 1 })
	var wg sync.WaitGroup
	statuses := make([]int, 2)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Long enough (100 steps) to still be running and waiting below.
			resp, err := http.Post(ss.URL()+"/v1/completions", "application/json",
				strings.NewReader(`{"prompt":"Hello","max_tokens":100,"ignore_eos":true}`))
			if err == nil {
				statuses[i] = resp.StatusCode
				resp.Body.Close()
			}
		}()
		// One at a time: the second must arrive once the first is running.
		waitFor(t, func() bool { st := ss.eng.Stats(); return st.NumRunning == 1 && st.NumWaiting == i })
	}
	resp, body := post(t, ss.Server, "/v1/completions", `{"prompt":"Hello","max_tokens":4}`)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" ||
		!strings.Contains(string(body), `"code":"rate_limit_exceeded"`) {
		t.Errorf("got %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	wg.Wait()
	if statuses[0] != 200 || statuses[1] != 200 {
		t.Errorf("the admitted requests got %v", statuses)
	}
	ss.waitIdle(t)
}

// TestE2EStopStringAborts: a stop string ends the engine request (blocks
// freed) long before max_tokens.
func TestE2EStopStringAborts(t *testing.T) {
	ss := startSimServer(t, time.Millisecond, nil)
	tok := testTokenizer(t)
	// Find the text of the sim's 3rd token for seed 3 and stop on it.
	stop := tok.Decode([]int32{ss.dev.Token(3, 2, -1)})
	stopJSON, _ := json.Marshal(stop)
	body := fmt.Sprintf(`{"prompt":"Hi","max_tokens":900,"ignore_eos":true,"seed":3,"stop":%s}`, stopJSON)
	c := complete(t, ss.Server, body)
	if c.Choices[0].FinishReason != "stop" || c.Usage.CompletionTokens > 3 || strings.Contains(c.Choices[0].Text, stop) {
		t.Errorf("stop %q: %+v usage %+v", stop, c.Choices[0], c.Usage)
	}
	ss.waitIdle(t)
}
