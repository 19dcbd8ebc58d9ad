package online

import (
	"context"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/roseinfer/roseinfer/engine/hrtimer"
	"github.com/roseinfer/roseinfer/harness/backend"
	"github.com/roseinfer/roseinfer/harness/backend/backendtest"
	"github.com/roseinfer/roseinfer/harness/servers"
	"github.com/roseinfer/roseinfer/results"
)

// Tests against the real `roseinfer serve --device sim`: the server,
// scheduler and KV cache are real, the forward is a fixed step, so every
// inter-token gap the server produces is the step time, and what the
// harness measures on top of it is the harness's own error.

func TestMain(m *testing.M) { backendtest.Main(m) }

// roseinferBinary is cmd/roseinfer built once for the package ($ROSEINFER_BIN names a
// prebuilt one instead).
func roseinferBinary(t *testing.T) string { return backendtest.RoseinferOnce(t) }

func simOptions(t *testing.T, stepUS int, extra ...string) OnlineOptions {
	o := DefaultOnline()
	o.Servers.RoseinferBin = roseinferBinary(t)
	o.Servers.Device = "sim"
	o.Servers.ServerArgs = append([]string{"--sim-step-us", fmt.Sprint(stepUS)}, extra...)
	o.Load.Scales = []float64{1}
	o.Load.StartOffsetS = 0.2
	o.Workload.IgnoreEOS = true
	o.Workload.WarmupRequests = 5
	o.Workload.WarmupOutputLen = 8
	o.Servers.PortBase = backendtest.PortBase(t)
	o.Output.RunDir = t.TempDir()
	o.Servers.TimeoutReady = 60 * time.Second
	// Pinning would also pin this test process for the tests after it.
	o.Servers.ServerCPUs, o.Servers.ClientCPUs = servers.NoPinning, servers.NoPinning
	return o
}

// schedProbe measures how late this process's goroutines wake while a test
// runs: a goroutine sleeps 1 ms at a time on an hrtimer (a Go timer alone
// is up to 1 ms late on an idle Linux process, which would hide the noise
// under its own granularity) and records by how much each wake-up missed
// its target. On a quiet machine that is tens of µs; on a loaded one (go
// test runs packages in parallel on 2 cores) it is milliseconds, and every
// latency the harness measures is late by as much without any fault of the
// harness. The fidelity test widens its median
// bounds by this noise and judges tails only when the noise is below the
// bound. BENCH_FIDELITY_STRICT=1 makes the probe report zero: every bound is
// then asserted as stated (for a quiet machine; docs/BENCHMARKS.md).
type schedProbe struct {
	stop chan struct{}
	done chan struct{}
	late []float64 // ms
}

func startProbe(t *testing.T) *schedProbe {
	timer, err := hrtimer.New()
	if err != nil {
		t.Fatal(err)
	}
	p := &schedProbe{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer timer.Close()
		for {
			select {
			case <-p.stop:
				return
			default:
			}
			target := time.Now().Add(time.Millisecond)
			if err := timer.SleepUntil(context.Background(), target); err != nil {
				return
			}
			p.late = append(p.late, float64(time.Since(target))/1e6)
		}
	}()
	return p
}

// finish stops the probe and returns its lateness p50 and p99 in ms, or
// zeros in strict mode.
func (p *schedProbe) finish() (p50, p99 float64) {
	close(p.stop)
	<-p.done
	if os.Getenv("BENCH_FIDELITY_STRICT") == "1" || len(p.late) == 0 {
		return 0, 0
	}
	sort.Float64s(p.late)
	return p.late[len(p.late)/2], p.late[len(p.late)*99/100]
}

// serverTPOTMs is the median over requests of the server's own time per
// output token, (token_s[N-1] - token_s[0]) / (N - 1), in ms.
func serverTPOTMs(reqs []results.Request) float64 {
	var v []float64
	for _, r := range reqs {
		if st := r.ServerTiming; st != nil && len(st.TokenS) > 1 {
			v = append(v, (st.TokenS[len(st.TokenS)-1]-st.TokenS[0])/float64(len(st.TokenS)-1)*1000)
		}
	}
	sort.Float64s(v)
	if len(v) == 0 {
		return math.NaN()
	}
	return v[len(v)/2]
}

// fidelityRun replays 300 requests at 200 req/s against the sim device
// (1 ms steps) and returns what missed its bound, and whether the attempt
// could be judged at all.
func fidelityRun(t *testing.T) ([]string, bool) {
	const stepMs = 1.0
	o := simOptions(t, 1000)
	// 200 req/s for 1.5 s, 8 tokens each: enough token gaps for the medians
	// while keeping the client's reading work small on a shared machine.
	o.Workload.TracePath = backendtest.EvenBurstTrace(t, 300, 200, 16, 8)
	o.Workload.N = 300
	probe := startProbe(t)
	rep, err := Online(context.Background(), context.Background(), o)
	noise50, noise99 := probe.finish()
	on := loadCleanRun(t, rep, err)
	s := on.Summaries[0]
	if s.NumSuccess != 300 || s.TotalOutputTokens != 300*8 {
		t.Fatalf("%d/%d ok, %d tokens; want all 300 with exactly 8 tokens", s.NumSuccess, s.NumRequests, s.TotalOutputTokens)
	}
	if s.NetworkMs == nil {
		t.Fatal("no server timing in the results")
	}
	if s.ITLClientMinusServerMs == nil {
		// Every stream arrived as one chunk: a starved server merged all
		// its tokens, so there is no client gap to compare.
		t.Logf("no request had two chunks (the server merged every stream): attempt not judged")
		return nil, false
	}
	srvTPOT := serverTPOTMs(on.ByBackend["roseinfer"].Runs[0].RequestMetrics)
	t.Logf("TPOT p50 %.4f ms (server %.4f), ITL p50 %.4f ms (client-server p50 %.4f), TTFT-server p50 %.3f p99 %.3f ms, send lag p50 %.3f p99 %.3f ms; wake-up lateness p50 %.3f p99 %.3f ms",
		*s.TPOTMs.P50, srvTPOT, *s.ITLMs.P50, *s.ITLClientMinusServerMs.P50, *s.NetworkMs.P50, *s.NetworkMs.P99,
		*s.SendLagMs.P50, *s.SendLagMs.P99, noise50, noise99)
	var missed []string
	check := func(ok bool, format string, args ...any) {
		if !ok {
			missed = append(missed, fmt.Sprintf(format, args...))
		}
	}
	within := func(v, want, tol float64) bool { return math.Abs(v-want) <= tol }
	// The dispatcher is the client's alone: judged on every attempt.
	check(*s.SendLagMs.P50 < 1+2*noise50, "send lag p50 %.3f ms at 200 req/s, want < %.3f ms", *s.SendLagMs.P50, 1+2*noise50)
	// Everything else also goes through the server's HTTP writer. When the
	// server's own steps ran late (its TPOT off the 1 ms step), the machine
	// starved the server process too, its writer delayed and merged tokens,
	// and a comparison would judge the machine: the attempt is not judged.
	if !within(srvTPOT, stepMs, 0.1) {
		t.Logf("server's own TPOT p50 %.4f ms is off its 1 ms step (machine loaded): attempt not judged", srvTPOT)
		return missed, false
	}
	// Medians at the acceptance bound plus the median wake-up lateness
	// (client and server are each scheduled once per figure).
	tol50 := 0.1 + 2*noise50
	check(within(*s.TPOTMs.P50, stepMs, tol50), "TPOT p50 %.4f ms, want %.1f ± %.3f ms", *s.TPOTMs.P50, stepMs, tol50)
	check(within(*s.ITLMs.P50, stepMs, tol50), "ITL p50 %.4f ms, want %.1f ± %.3f ms", *s.ITLMs.P50, stepMs, tol50)
	check(within(*s.ITLClientMinusServerMs.P50, 0, tol50), "ITL client-server p50 %.4f ms, want within %.3f ms", *s.ITLClientMinusServerMs.P50, tol50)
	// Tails at the acceptance bounds, when this process's wake-ups are
	// themselves on time to within the bound; otherwise the OS sets them.
	if noise99 < 1 {
		check(*s.NetworkMs.P99 < 1+noise99, "client TTFT - server TTFT p99 %.3f ms, want < %.3f ms", *s.NetworkMs.P99, 1+noise99)
		check(*s.SendLagMs.P99 < 1+noise99, "send lag p99 %.3f ms at 200 req/s, want < %.3f ms", *s.SendLagMs.P99, 1+noise99)
	} else {
		t.Logf("wake-up lateness p99 %.3f ms exceeds the 1 ms bound (machine loaded): p99 bounds not judged", noise99)
	}
	return missed, true
}

// TestSimFidelity checks the acceptance figures. Load from elsewhere can
// spoil a replay, so it gets three attempts: it passes when a judged attempt
// meets every bound, fails when judged attempts all miss, and is skipped,
// saying why, when the machine was too loaded to judge any.
func TestSimFidelity(t *testing.T) {
	var missed []string
	judgedAny := false
	for attempt := 1; attempt <= 3; attempt++ {
		m, judged := fidelityRun(t)
		if judged && len(m) == 0 {
			return
		}
		if judged || len(m) > 0 { // a send-lag miss counts on any attempt
			judgedAny, missed = true, m
		}
		if len(m) > 0 {
			t.Logf("attempt %d missed: %s", attempt, strings.Join(m, "; "))
		}
	}
	if !judgedAny {
		t.Skip("the machine was too loaded to judge the harness on any attempt (the server's own steps ran late)")
	}
	for _, m := range missed {
		t.Error(m)
	}
}

// A server that sends several tokens per chunk (--stream-interval 4): the
// client counts tokens from the server's token ids, and per-token ITL and
// TPOT still equal the step time while the inter-chunk latency is 4 steps.
func TestSimMultiTokenChunks(t *testing.T) {
	o := simOptions(t, 1000, "--stream-interval", "4")
	o.Workload.TracePath = backendtest.EvenBurstTrace(t, 20, 20, 16, 33)
	o.Workload.N = 20
	probe := startProbe(t)
	rep, err := Online(context.Background(), context.Background(), o)
	on := loadCleanRun(t, rep, err)
	// The server sends every 4 tokens, or more at once when its writer
	// falls behind the engine (it merges what is pending): the client must
	// count what each chunk carries, whatever it is.
	chunks, tokens := 0, 0
	for _, r := range on.ByBackend["roseinfer"].Runs[0].RequestMetrics {
		sum := 0
		for _, k := range r.ChunkTokens {
			sum += k
		}
		chunks += len(r.ChunkTokens)
		tokens += sum
		if r.NumOutputTokens != 33 || sum != 33 || r.TokenCountSource != "token_ids" {
			t.Errorf("request %d: %d tokens (chunks sum to %d, source %q), want 33 from token ids",
				r.Index, r.NumOutputTokens, sum, r.TokenCountSource)
		}
	}
	// 33 tokens in chunks of 4 is 9 chunks (3.7 tokens each); merging only
	// makes chunks bigger.
	if perChunk := float64(tokens) / float64(chunks); perChunk < 3.5 {
		t.Errorf("%.2f tokens per chunk; is --stream-interval 4 honoured?", perChunk)
	}
	s := on.Summaries[0]
	srvTPOT := serverTPOTMs(on.ByBackend["roseinfer"].Runs[0].RequestMetrics)
	noise50, _ := probe.finish()
	t.Logf("TPOT p50 %.4f ms (server %.4f), ITL p50 %.4f ms (client-server p50 %.4f), ICL p50 %.4f ms",
		*s.TPOTMs.P50, srvTPOT, *s.ITLMs.P50, *s.ITLClientMinusServerMs.P50, *s.ICLMs.P50)
	// Per-token ITL spreads a chunk's gap over its tokens: it matches the
	// server's per-token gaps, not the inter-chunk gaps. (TPOT is not
	// checked: docs/METRICS.md divides by N-1, so a first chunk carrying several
	// merged tokens lowers it.)
	if math.Abs(srvTPOT-1) > 0.1 {
		t.Skipf("server's own TPOT p50 %.4f ms is off its 1 ms step (machine loaded): timings not judged", srvTPOT)
	}
	tol := 0.1 + 2*noise50
	if d := *s.ITLClientMinusServerMs.P50; d > tol || d < -tol {
		t.Errorf("per-token ITL client-server p50 %.4f ms, want within %.3f ms", d, tol)
	}
	if d := *s.ITLMs.P50 - 1; d > tol || d < -tol {
		t.Errorf("per-token ITL p50 %.4f ms, want 1 ± %.3f ms", *s.ITLMs.P50, tol)
	}
	if *s.ICLMs.P50 < 3.5 {
		t.Errorf("inter-chunk p50 %.4f ms, want about 4 ms (4 tokens per chunk)", *s.ICLMs.P50)
	}
}

// killServer is a Progress that SIGKILLs the launched server once half the
// first round's requests have finished.
type killServer struct {
	total  int
	killed atomic.Bool
	done   atomic.Int64
}

func (k *killServer) Start(label string, scale float64, round, rounds, total int) Bar {
	k.total = total
	return k
}

func (k *killServer) Add(n int) {
	if k.done.Add(int64(n)) >= int64(k.total/2) && k.killed.CompareAndSwap(false, true) {
		for _, s := range backend.Running() {
			syscall.Kill(s.PID(), syscall.SIGKILL)
		}
	}
}

func (k *killServer) Finish(string) {}

func TestServerKilledMidReplay(t *testing.T) {
	o := simOptions(t, 1000)
	o.Workload.TracePath = backendtest.EvenBurstTrace(t, 60, 20, 16, 8) // 3 s
	o.Workload.N = 60
	o.Load.Scales = []float64{1, 1} // the second scale must not run
	// A SIGKILLed server cannot remove its temp profile dir: give it one
	// the test removes.
	o.Servers.ServerArgs = append(o.Servers.ServerArgs, "--profile-dir", t.TempDir())
	killer := &killServer{}
	o.Output.Progress = killer
	rep, err := Online(context.Background(), context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if !killer.killed.Load() {
		t.Fatal("the server was never killed")
	}
	if len(rep.Failures) == 0 || !strings.HasPrefix(rep.Failures[0], "roseinfer: server process exited during the run") {
		t.Fatalf("failures %q, want one naming roseinfer and the exit", rep.Failures)
	}
	on, err := results.LoadOnline(rep.ResultsPath)
	if err != nil {
		t.Fatal(err)
	}
	b := on.ByBackend["roseinfer"]
	if b.Error == "" || len(b.Runs) != 1 || len(on.Summaries) != 1 {
		t.Fatalf("error %q, %d runs, %d summaries; want the error and only the first scale", b.Error, len(b.Runs), len(on.Summaries))
	}
	s := on.Summaries[0]
	if s.NumRequests != 60 || s.NumError == 0 || s.NumSuccess == 0 {
		t.Errorf("%d requests, %d ok, %d errors: want all sent, some ok before the kill, the rest errors", s.NumRequests, s.NumSuccess, s.NumError)
	}
	// Once dead, nothing succeeds: every request sent after the kill failed.
	reqs := b.Runs[0].RequestMetrics
	last := reqs[len(reqs)-1]
	if last.Error == nil || (last.ErrorKind != "connect" && last.ErrorKind != "stream_broken") {
		t.Errorf("last request: error %v kind %q, want a connect error", last.Error, last.ErrorKind)
	}
	if len(backend.Running()) != 0 {
		t.Errorf("servers still registered after the run")
	}
}

// --endpoint chat sends text prompts to /v1/chat/completions; the role-only
// opener is not a token, and every request still yields exactly its tokens.
func TestSimChatEndpoint(t *testing.T) {
	o := simOptions(t, 500)
	o.Workload.Endpoint = "chat"
	o.Workload.TracePath = backendtest.EvenBurstTrace(t, 10, 50, 24, 8)
	o.Workload.N = 10
	rep, err := Online(context.Background(), context.Background(), o)
	on := loadCleanRun(t, rep, err)
	s := on.Summaries[0]
	if s.NumSuccess != 10 || s.TotalOutputTokens != 80 {
		t.Errorf("%d/%d ok with %d tokens, want 10 with 80", s.NumSuccess, s.NumRequests, s.TotalOutputTokens)
	}
	for _, r := range on.ByBackend["roseinfer"].Runs[0].RequestMetrics {
		if r.UsagePromptTokens == nil || *r.UsagePromptTokens < 24 {
			t.Errorf("request %d: server counted %v prompt tokens, want the 24-token text plus the chat template", r.Index, r.UsagePromptTokens)
		}
	}
}
