package capacity

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/roseinfer/roseinfer/harness/backend"
	"github.com/roseinfer/roseinfer/harness/backend/backendtest"
	"github.com/roseinfer/roseinfer/harness/servers"
	"github.com/roseinfer/roseinfer/results"
)

// simOptions are a capacity run against `roseinfer serve --device sim`
// replaying trace, every request asking for its full output length.
func simOptions(t *testing.T, trace string, n int) Options {
	o := DefaultOptions()
	o.Online.Workload.TracePath, o.Online.Workload.N = trace, n
	o.Online.Workload.IgnoreEOS = true
	o.Online.Workload.WarmupRequests, o.Online.Workload.WarmupOutputLen = 2, 4
	o.Online.Load.StartOffsetS = 0.2
	o.Online.Servers.Device = "sim"
	o.Online.Servers.PortBase = backendtest.PortBase(t)
	o.Online.Servers.TimeoutReady = 60 * time.Second
	// Pinning would also pin this test process for the tests after it.
	o.Online.Servers.ServerCPUs, o.Online.Servers.ClientCPUs = servers.NoPinning, servers.NoPinning
	o.Online.Output.RunDir = t.TempDir()
	return o
}

// The capacity of a sim server is known in closed form, and the search
// finds it within the tolerance, against a launched server and one that
// is already running (--base-url).
//
// The server: `roseinfer serve --device sim --sim-step-us 2000
// --max-num-seqs 4 --no-overlap-schedule`. Every engine step takes exactly
// S = 2 ms while the engine is busy (the sim ends steps on deadlines, so
// the engine's own work hides inside them), whatever the batch. A request
// of 16 prompt tokens and L = 32 output tokens (ignore_eos) holds one of
// the B = 4 sequence slots for exactly L steps: its prefill step samples
// token 1, L − 1 decode steps the rest, and its slot is free for the next
// step's plan (without overlap scheduling no step is planned before the
// previous one's tokens are applied). So the server completes at most
//
//	μ = B / (L·S) = 4 / (32 · 2 ms) = 62.5 req/s.
//
// The trace sends N = 150 requests evenly spaced, so arrivals at rate
// λ < μ never queue for more than a step: TTFT is a few ms, well under the
// 40 ms objective, and every request is good. Above μ the queue grows by
// (1/μ − 1/λ) per request: request k waits about k·(1/μ − 1/λ), and the
// share that waits no longer than T = 40 ms is at most T / (N·(1/μ − 1/λ)).
// That share reaches the 95% target g only while
//
//	λ ≤ λ* = μ / (1 − μ·T / (g·N)) = 62.5 / (1 − 62.5 · 0.04 / 142.5) ≈ 63.6 req/s
//
// (an upper bound: TTFT's own few ms only lower it). So the true capacity
// lies in [μ, λ*] = [62.5, 63.6] req/s; the search's answer lies within
// the 5% tolerance below it, so in [μ/1.05, λ*] = [59.5, 63.6] req/s.
// (The --base-url run replays only N = 60 requests, to save time: λ* = 65.4.)
// TPOT is S = 2 ms at every load, so the 10 ms TPOT objective never
// binds; it is there to check that every objective is applied.
func TestCapacityOfSimServer(t *testing.T) {
	const (
		stepMs, numSeqs, inputLen, outputLen = 2.0, 4, 16, 32
		ttftMs, tpotMs, target, tol          = 40.0, 10.0, 0.95, 0.05
		traceRate                            = 40.0 // req/s at scale 1: the first probe
	)
	mu := numSeqs / (outputLen * stepMs / 1000)
	bin := backendtest.Roseinfer(t)
	serverArgs := []string{"--sim-step-us", fmt.Sprint(int(stepMs * 1000)), "--max-num-seqs", fmt.Sprint(numSeqs), "--no-overlap-schedule"}
	check := func(t *testing.T, o Options, n int) {
		lambdaStar := mu / (1 - mu*ttftMs/1000/(target*float64(n)))
		lo, hi := mu/(1+tol), lambdaStar
		o.Online.Load.SLO = fmt.Sprintf("ttft=%gms,tpot=%gms", ttftMs, tpotMs)
		o.Search.Target, o.Search.Tolerance = target, tol
		// The send-lag rule is the unit tests' concern; on a loaded 2-core
		// test machine a few ms of lag would fail probes below μ and move
		// the answer for reasons unrelated to the server. TTFT is timed
		// from the actual send, so lag does not shift it.
		o.Online.Load.SendLagThresholdMs = 25
		rep, err := Run(context.Background(), context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		c, err := results.LoadCapacity(rep.CapacityPath)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Backends) != 1 {
			t.Fatalf("%d backends in capacity.json, want 1", len(c.Backends))
		}
		bk := c.Backends[0]
		for i, p := range bk.Probes {
			t.Logf("probe %d %-7s %6.2f req/s scale %.3f: %5.1f%% good, TTFT p90 %s ms, send lag p99 %s ms, pass %v",
				i+1, p.Phase, p.RateReqS, p.Scale, p.SLOAttainment*100, ms(p.TTFTP90Ms), ms(p.SendLagP99Ms), p.Pass)
			if p.Pass && !p.Valid {
				t.Errorf("probe %d passed while invalid", i+1)
			}
		}
		if !bk.Converged || bk.CapacityReqS == nil {
			t.Fatalf("search did not converge: %s (%s), failures %v", bk.Stop, bk.Error, rep.Failures)
		}
		got := *bk.CapacityReqS
		t.Logf("capacity %.2f req/s; by hand μ = %.2f, λ* = %.2f: answer expected in [%.2f, %.2f]", got, mu, lambdaStar, lo, hi)
		if got < lo || got > hi {
			t.Errorf("capacity %.2f req/s, want within [%.2f, %.2f] (μ = %.2f req/s, tolerance %v)", got, lo, hi, mu, tol)
		}
		if b := bk.Bracket; b.HiReqS == nil || *b.HiReqS > got*(1+tol) || *b.LoReqS != got {
			t.Errorf("bracket %v–%v is not within the tolerance of the answer %v", ms(b.LoReqS), ms(b.HiReqS), got)
		}
		if len(rep.Failures) != 0 {
			t.Errorf("failures: %v", rep.Failures)
		}
		// Every probe's requests are in online_results.json, and the
		// report has the capacity section and its figure.
		on, err := results.LoadOnline(filepath.Join(rep.RunDir, results.OnlineResultsFile))
		if err != nil {
			t.Fatal(err)
		}
		runs := 0
		for _, b := range on.ByBackend {
			runs += len(b.Runs)
		}
		if runs != len(bk.Probes) {
			t.Errorf("%d runs in online_results.json for %d probes", runs, len(bk.Probes))
		}
		page, err := os.ReadFile(filepath.Join(rep.RunDir, "report.html"))
		if err != nil || !strings.Contains(string(page), `id="fig-capacity_goodput"`) {
			t.Errorf("report.html without the capacity figure (%v)", err)
		}
	}

	t.Run("launched", func(t *testing.T) {
		const n = 150
		o := simOptions(t, backendtest.EvenBurstTrace(t, n, traceRate, inputLen, outputLen), n)
		o.Online.Servers.RoseinferBin = bin
		o.Online.Servers.ServerArgs = serverArgs
		check(t, o, n)
	})
	t.Run("base-url", func(t *testing.T) {
		spec := backend.Roseinfer(backend.RoseinferOptions{Binary: bin, Device: "sim", Flags: serverArgs})
		srv, err := backend.Launch(context.Background(), spec, backend.LaunchOptions{PortBase: backendtest.PortBase(t),
			RunDir: t.TempDir(), ReadyTimeout: 60 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Stop() })
		const n = 60
		o := simOptions(t, backendtest.EvenBurstTrace(t, n, traceRate, inputLen, outputLen), n)
		o.Online.Servers.BaseURL = srv.BaseURL
		check(t, o, n)
	})
}

func ms(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", *v)
}
