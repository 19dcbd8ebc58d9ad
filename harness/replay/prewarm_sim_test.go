package replay_test

import (
	"context"
	"testing"
	"time"

	"github.com/roseinfer/roseinfer/harness/backend"
	"github.com/roseinfer/roseinfer/harness/backend/backendtest"
	"github.com/roseinfer/roseinfer/harness/client"
	"github.com/roseinfer/roseinfer/harness/replay"
)

// TestPrewarmOpensThePoolBeforeTheSchedule replays a burst against the real
// `roseinfer serve --device sim`: 24 requests due within 12 ms, each
// streaming 20 tokens at 2 ms steps, so all are in flight at once. With the
// pool prewarmed to PoolSize of the schedule no connection is dialled after
// the round starts; without it (the control, which shows the test can
// fail) the burst dials its own.
func TestPrewarmOpensThePoolBeforeTheSchedule(t *testing.T) {
	bin := backendtest.Roseinfer(t)
	spec := backend.Roseinfer(backend.RoseinferOptions{Binary: bin, Device: "sim", Flags: []string{"--sim-step-us", "2000"}})
	srv, err := backend.Launch(context.Background(), spec, backend.LaunchOptions{PortBase: backendtest.PortBase(t),
		RunDir: t.TempDir(), ReadyTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	model := srv.RequestModel("")
	body := func(maxTokens int) []byte {
		b, err := client.BuildBody(client.Params{Model: model, PromptTokens: []int32{1, 2, 3, 4}, MaxTokens: maxTokens, TopP: 1,
			IgnoreEOS: true}, client.Roseinfer)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	const n = 24
	items := make([]replay.Item, n)
	for i := range items {
		items[i] = replay.Item{Index: i, AtS: 0.05 + float64(i)*0.0005, InputLen: 4, OutputLen: 20, Body: body(20)}
	}

	for _, prewarm := range []bool{true, false} {
		c := client.New(client.Options{BaseURL: srv.BaseURL, MaxConcurrency: n})
		_, lat, err := replay.WarmupLatency(context.Background(), c, client.Completions, [][]byte{body(8), body(8)})
		if err != nil || lat == nil || lat.FirstTokenS <= 0 || lat.PerTokenS <= 0 {
			t.Fatalf("warmup: latency %+v, %v", lat, err)
		}
		if prewarm {
			size := replay.PoolSize(items, lat)
			if size != n {
				t.Fatalf("PoolSize = %d for %d requests in flight together (latency %+v)", size, n, lat)
			}
			dialled, err := c.Prewarm(context.Background(), size)
			// The warmup left one connection; the rest are new.
			if err != nil || dialled != n-1 || c.NumOpen() != n {
				t.Fatalf("Prewarm(%d): %d dialled, %d open, %v", size, dialled, c.NumOpen(), err)
			}
			// The pool is already full: a second call dials nothing.
			if again, err := c.Prewarm(context.Background(), size); again != 0 || err != nil {
				t.Fatalf("Prewarm again: %d dialled, %v", again, err)
			}
		}
		before := c.NumDialled()
		round := replay.Run(context.Background(), items, replay.Options{Client: c, Endpoint: client.Completions})
		for _, r := range round.Requests {
			if r.Error != nil {
				t.Fatalf("prewarm %v: request %d: %s", prewarm, r.Index, *r.Error)
			}
		}
		after := c.NumDialled() - before
		c.Close()
		switch {
		case prewarm && after != 0:
			t.Errorf("prewarmed: %d connections dialled after the round started", after)
		case !prewarm && after == 0:
			t.Errorf("control without prewarm dialled nothing during the round: the check cannot fail")
		}
		t.Logf("prewarm %v: %d connections dialled during the round", prewarm, after)
	}
}
