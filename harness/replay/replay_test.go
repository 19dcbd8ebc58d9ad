package replay

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roseinfer/roseinfer/engine/hrtimer"
	"github.com/roseinfer/roseinfer/harness/client"
	"github.com/roseinfer/roseinfer/results"
)

// tokenServer streams n one-token chunks per request, pause apart.
func tokenServer(t *testing.T, n int, pause time.Duration) (*httptest.Server, *atomic.Int64) {
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		served.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i := 1; i <= n; i++ {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(pause):
			}
			fin := "null"
			if i == n {
				fin = `"length"`
			}
			io.WriteString(w, `data: {"choices":[{"text":"x","finish_reason":`+fin+`}],"usage":{"completion_tokens":`+itoa(i)+"}}\n\n")
			rc.Flush()
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv, &served
}

func itoa(i int) string {
	b := []byte{}
	for {
		b = append([]byte{byte('0' + i%10)}, b...)
		i /= 10
		if i == 0 {
			return string(b)
		}
	}
}

func items(n int, gap float64) []Item {
	out := make([]Item, n)
	for i := range out {
		// Reverse order on purpose: Run must sort by time.
		j := n - 1 - i
		out[i] = Item{Index: j, AtS: 0.01 + float64(j)*gap, InputLen: 4, OutputLen: 3, Body: []byte(`{}`)}
	}
	return out
}

func TestRunSendsOpenLoopInTimeOrder(t *testing.T) {
	// Each request takes ~90 ms but they are scheduled 10 ms apart: an open
	// loop sends them all on schedule regardless.
	srv, _ := tokenServer(t, 3, 30*time.Millisecond)
	c := client.New(client.Options{BaseURL: srv.URL, MaxConcurrency: 20})
	defer c.Close()
	var done atomic.Int64
	round := Run(context.Background(), items(20, 0.01), Options{Client: c, OnDone: func(*results.Request) { done.Add(1) }})
	if len(round.Requests) != 20 || round.NotSent != 0 || round.Interrupted || done.Load() != 20 {
		t.Fatalf("requests %d not sent %d interrupted %v done %d", len(round.Requests), round.NotSent, round.Interrupted, done.Load())
	}
	for i, r := range round.Requests {
		if r.Index != i {
			t.Errorf("request %d has index %d, want send order = time order", i, r.Index)
		}
		if r.Error != nil {
			t.Errorf("request %d failed: %s", i, *r.Error)
		}
		if r.NumOutputTokens != 3 || len(r.ChunkS) != 3 {
			t.Errorf("request %d: %d tokens in %d chunks", i, r.NumOutputTokens, len(r.ChunkS))
		}
		// Never early; lateness is for harness/metrics to judge.
		if r.StartS < r.ScheduledS {
			t.Errorf("request %d sent %.6f s before its time", i, r.ScheduledS-r.StartS)
		}
		if r.EndS < r.StartS {
			t.Errorf("request %d ends before it starts", i)
		}
	}
	// Open loop: each request is sent while the one before is in flight
	// (10 ms schedule gap, ~90 ms per request).
	for i := 1; i < len(round.Requests); i++ {
		if round.Requests[i].StartS >= round.Requests[i-1].EndS {
			t.Errorf("request %d sent at %.3f s, after request %d ended at %.3f s: not open loop",
				i, round.Requests[i].StartS, i-1, round.Requests[i-1].EndS)
		}
	}
}

func TestRunInterruptDrainsInFlight(t *testing.T) {
	srv, served := tokenServer(t, 3, 40*time.Millisecond)
	c := client.New(client.Options{BaseURL: srv.URL, MaxConcurrency: 10})
	defer c.Close()
	ctx, stop := context.WithCancel(context.Background())
	// Items 0..4 go out in the first 50 ms; stop dispatching at 60 ms.
	time.AfterFunc(60*time.Millisecond, stop)
	round := Run(ctx, items(10, 0.01), Options{Client: c})
	if !round.Interrupted || round.NotSent == 0 || len(round.Requests)+round.NotSent != 10 {
		t.Fatalf("interrupted %v, sent %d, not sent %d", round.Interrupted, len(round.Requests), round.NotSent)
	}
	for i, r := range round.Requests {
		if r.Error != nil {
			t.Errorf("in-flight request %d was not drained: %s", i, *r.Error)
		}
	}
	if int(served.Load()) != len(round.Requests) {
		t.Errorf("server saw %d requests, round recorded %d", served.Load(), len(round.Requests))
	}
}

func TestRunAbortCancelsInFlight(t *testing.T) {
	srv, _ := tokenServer(t, 3, 200*time.Millisecond)
	c := client.New(client.Options{BaseURL: srv.URL, MaxConcurrency: 10})
	defer c.Close()
	reqCtx, abort := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, abort)
	round := Run(reqCtx, items(3, 0.001), Options{Client: c, RequestContext: reqCtx})
	if len(round.Requests) != 3 {
		t.Fatalf("%d requests sent", len(round.Requests))
	}
	for i, r := range round.Requests {
		if r.ErrorKind != client.ErrCanceled {
			t.Errorf("request %d: kind %q, want %q", i, r.ErrorKind, client.ErrCanceled)
		}
	}
}

func TestWarmupStopsAtFirstFailure(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 2 {
			http.Error(w, `{"error":{"message":"nope"}}`, http.StatusBadRequest)
			return
		}
		io.WriteString(w, "data: {\"choices\":[{\"text\":\"x\",\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	c := client.New(client.Options{BaseURL: srv.URL})
	_, err := Warmup(context.Background(), c, client.Completions, [][]byte{{'{', '}'}, {'{', '}'}, {'{', '}'}})
	if err == nil || calls.Load() != 2 {
		t.Errorf("err %v after %d calls; want an error after 2", err, calls.Load())
	}
	calls.Store(10)
	if _, err := Warmup(context.Background(), c, client.Completions, [][]byte{{'{', '}'}}); err != nil {
		t.Errorf("successful warmup: %v", err)
	}
}

// sleepUntil never returns before its target, on the hrtimer or the Go-timer
// fallback, with or without a spin window, and gives up when ctx ends.
func TestSleepUntil(t *testing.T) {
	timer, err := hrtimer.New()
	if err != nil {
		t.Fatal(err)
	}
	defer timer.Close()
	for _, tc := range []struct {
		name  string
		timer *hrtimer.Timer
		spin  time.Duration
	}{
		{"hrtimer", timer, 0},
		{"hrtimer and spin", timer, DefaultSpinWindow},
		{"Go timer and spin", nil, goTimerSpinWindow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, ahead := range []time.Duration{-time.Millisecond, 0, 50 * time.Microsecond, 3 * time.Millisecond} {
				target := time.Now().Add(ahead)
				if !sleepUntil(context.Background(), tc.timer, target, tc.spin) {
					t.Fatalf("%v ahead: gave up", ahead)
				}
				if time.Now().Before(target) {
					t.Fatalf("%v ahead: returned before the target", ahead)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
			defer cancel()
			if sleepUntil(ctx, tc.timer, time.Now().Add(time.Hour), tc.spin) {
				t.Fatal("slept through its context's end")
			}
		})
	}
}
