package online

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roseinfer/roseinfer/harness/servers"
	"github.com/roseinfer/roseinfer/results"
)

// fakeOpenAI streams max_tokens tokens per request in chunks of chunkTokens,
// with continuous usage, a step apart.
func fakeOpenAI(t *testing.T, chunkTokens int, step time.Duration) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			io.WriteString(w, `{"object":"list","data":[{"id":"fake-model"}]}`)
			return
		case "/v1/completions":
		default:
			http.NotFound(w, r)
			return
		}
		var req struct {
			Model     string `json:"model"`
			Prompt    []int  `json:"prompt"`
			MaxTokens int    `json:"max_tokens"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model != "fake-model" || len(req.Prompt) == 0 {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		served.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for n := 0; n < req.MaxTokens; {
			time.Sleep(step)
			k := min(chunkTokens, req.MaxTokens-n)
			n += k
			fin := "null"
			if n == req.MaxTokens {
				fin = `"length"`
			}
			fmt.Fprintf(w, "data: {\"choices\":[{\"text\":\"%s\",\"finish_reason\":%s}],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d}}\n\n",
				strings.Repeat("x", k), fin, len(req.Prompt), n)
			rc.Flush()
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv, &served
}

func smallOptions(t *testing.T, baseURL string) OnlineOptions {
	o := DefaultOnline()
	o.Servers.BaseURL = baseURL
	o.Workload.N = 12
	o.Load.Scales = []float64{0.02, 0.05}
	o.Load.StartOffsetS = 0.05
	o.Workload.MaxOutputLen = 6
	o.Workload.WarmupRequests = 2
	o.Workload.WarmupOutputLen = 2
	o.Output.RunDir = t.TempDir()
	// The default CPU split would pin this test process for later tests.
	o.Servers.ServerCPUs, o.Servers.ClientCPUs = servers.NoPinning, servers.NoPinning
	return o
}

func TestOnlineAgainstRunningServer(t *testing.T) {
	srv, served := fakeOpenAI(t, 3, time.Millisecond)
	o := smallOptions(t, srv.URL)
	o.Load.Repeat = 2
	o.Load.SLO = "ttft=1000ms"
	rep, err := Online(context.Background(), context.Background(), o)
	on := loadCleanRun(t, rep, err)
	// 2 warmups + 12 requests × 2 scales × 2 rounds.
	if got := served.Load(); got != 2+12*2*2 {
		t.Errorf("server saw %d requests", got)
	}
	if len(on.Summaries) != 2 {
		t.Fatalf("%d summaries, want one per scale", len(on.Summaries))
	}
	b := on.ByBackend["openai"]
	if b == nil || len(b.Runs) != 4 || b.Error != "" {
		t.Fatalf("by_backend[openai] = %+v", b)
	}
	for _, s := range on.Summaries {
		if s.NumRequests != 24 || s.NumSuccess != 24 || len(s.Rounds) != 2 || s.GoodputReqPerS == nil {
			t.Errorf("summary scale %v: %d/%d, %d rounds, goodput %v", s.Scale, s.NumSuccess, s.NumRequests, len(s.Rounds), s.GoodputReqPerS)
		}
	}
	for _, run := range b.Runs {
		for _, r := range run.RequestMetrics {
			if r.NumOutputTokens != r.OutputLen || r.TTFTS == nil || r.TokenCountSource != "continuous_usage" {
				t.Errorf("request %d: %d tokens of %d, ttft %v, source %q", r.Index, r.NumOutputTokens, r.OutputLen, r.TTFTS, r.TokenCountSource)
			}
			// Three tokens per chunk: ITL comes from tokens, not chunks.
			for i, k := range r.ChunkTokens {
				if want := min(3, r.OutputLen-3*i); k != want {
					t.Errorf("request %d chunk %d carried %d tokens, want %d", r.Index, i, k, want)
				}
			}
		}
	}
	md, err := os.ReadFile(rep.SummaryPath)
	if err != nil || !strings.Contains(string(md), "| scale | backend") {
		t.Errorf("summary %s: %v\n%s", rep.SummaryPath, err, md)
	}
	for _, key := range []string{"model", "n", "scales", "versions", "run_start_time", "run_end_time", "wall_s", "trace_path"} {
		if _, ok := on.Meta[key]; !ok {
			t.Errorf("meta lacks %q", key)
		}
	}
}

func TestOnlineRecordsUnreachableServerAndUnknownBackend(t *testing.T) {
	o := smallOptions(t, "http://127.0.0.1:1")
	o.Servers.TimeoutReady = 300 * time.Millisecond
	rep, err := Online(context.Background(), context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Failures) != 1 || !strings.HasPrefix(rep.Failures[0], "openai: ") {
		t.Errorf("failures %v, want one naming the backend", rep.Failures)
	}
	on, err := results.LoadOnline(rep.ResultsPath)
	if err != nil {
		t.Fatal(err)
	}
	if on.ByBackend["openai"] == nil || on.ByBackend["openai"].Error == "" {
		t.Errorf("backend error not recorded: %+v", on.ByBackend["openai"])
	}

	o = smallOptions(t, "")
	o.Servers.Backends = []string{"vllm"}
	rep, err = Online(context.Background(), context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(rep.RunDir, results.OnlineResultsFile))
	if len(rep.Failures) != 1 || !strings.Contains(string(data), `"skipped": true`) {
		t.Errorf("unknown backend: failures %v", rep.Failures)
	}
}

func TestOnlineInterruptWritesPartialResults(t *testing.T) {
	srv, _ := fakeOpenAI(t, 1, 2*time.Millisecond)
	o := smallOptions(t, srv.URL)
	o.Load.Scales = []float64{0.3, 0.3, 0.3}
	stop, cancel := context.WithCancel(context.Background())
	time.AfterFunc(800*time.Millisecond, cancel)
	rep, err := Online(stop, context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Interrupted {
		t.Fatal("not marked interrupted")
	}
	on, err := results.LoadOnline(rep.ResultsPath)
	if err != nil {
		t.Fatal(err)
	}
	if on.Meta["interrupted"] != true || len(on.Summaries) == 0 || len(on.Summaries) == 3 {
		t.Errorf("interrupted %v, %d summaries: want a partial run", on.Meta["interrupted"], len(on.Summaries))
	}
	last := on.Summaries[len(on.Summaries)-1]
	if last.Valid || !strings.Contains(last.InvalidReason, "interrupted") {
		t.Errorf("the interrupted scale must be invalid: %+v", last.InvalidReason)
	}
}

// loadCleanRun checks that an Online run returned no error, no backend
// failure and no interruption, and loads its results file.
func loadCleanRun(t *testing.T, rep *Report, err error) *results.Online {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Failures) != 0 || rep.Interrupted {
		t.Fatalf("failures %v interrupted %v", rep.Failures, rep.Interrupted)
	}
	on, err := results.LoadOnline(rep.ResultsPath)
	if err != nil {
		t.Fatal(err)
	}
	return on
}

// TestOnlineFailsWhenServerDiesMidRun: a running server (--base-url) that
// goes away after a few requests of the only scale fails the run, after the
// results are written, and the console failure and online_summary.md both
// name the scale, the success rate and the error kinds.
func TestOnlineFailsWhenServerDiesMidRun(t *testing.T) {
	srv, served := fakeOpenAI(t, 3, time.Millisecond)
	inner := srv.Config.Handler
	var once sync.Once
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner.ServeHTTP(w, r)
		if served.Load() >= 2+5 { // 2 warmups, then 5 of the scale's requests
			once.Do(func() { go srv.Close() })
		}
	})
	o := smallOptions(t, srv.URL)
	o.Workload.N = 20
	o.Load.Scales = []float64{0.2}
	rep, err := Online(context.Background(), context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Failures) != 1 || !strings.Contains(rep.Failures[0], "openai: scale 0.2: success rate") ||
		!strings.Contains(rep.Failures[0], "below --min-success-rate 99%: ") {
		t.Fatalf("failures %q: want the scale below --min-success-rate", rep.Failures)
	}
	on, err := results.LoadOnline(rep.ResultsPath)
	if err != nil || len(on.Summaries) != 1 || on.Summaries[0].NumSuccess >= 20 {
		t.Fatalf("results: %v, %+v", err, on.Summaries)
	}
	t.Log(rep.Failures[0])
	md, _ := os.ReadFile(rep.SummaryPath)
	if !strings.Contains(string(md), "**FAILED**") || !strings.Contains(string(md), "scale 0.2: success rate") {
		t.Errorf("summary does not say why the run failed:\n%s", md)
	}
}

// TestOnlineSendsAPIKey: with an API key every request to a server that
// requires it (readiness probe, warmup, replay) carries it, and the key is
// nowhere in the results or the summary.
func TestOnlineSendsAPIKey(t *testing.T) {
	const key = "sk-online-test-51c2"
	srv, served := fakeOpenAI(t, 3, time.Millisecond)
	inner := srv.Config.Handler
	var denied atomic.Int64
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+key {
			denied.Add(1)
			http.Error(w, `{"error":{"message":"invalid api key"}}`, http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	})
	o := smallOptions(t, srv.URL)
	o.Load.Scales = []float64{0.02}
	o.Servers.APIKey = key
	rep, err := Online(context.Background(), context.Background(), o)
	loadCleanRun(t, rep, err)
	if denied.Load() != 0 || served.Load() != 2+12 {
		t.Errorf("%d requests denied, %d served; want 0 and 14", denied.Load(), served.Load())
	}
	for _, f := range []string{rep.ResultsPath, rep.SummaryPath} {
		if data, _ := os.ReadFile(f); strings.Contains(string(data), key) {
			t.Errorf("%s contains the API key", f)
		}
	}
}
