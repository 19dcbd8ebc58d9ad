package engine

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/roseinfer/roseinfer/engine/device/sim"
	"github.com/roseinfer/roseinfer/engine/sample"
)

// randomRequest is one request of the random workload and what its client does.
type randomRequest struct {
	req        Request
	abortAfter int // abort once this many outputs arrived; -1 never, 0 right after Submit
	slowReader bool
}

func makeRandomRequests(rng *rand.Rand, n int) []randomRequest {
	shared := prompt(500, 48) // common prefix so the prefix cache gets hits
	out := make([]randomRequest, n)
	for i := range out {
		var p []int32
		if rng.IntN(2) == 0 {
			p = append(p, shared[:rng.IntN(len(shared))]...)
		}
		p = append(p, prompt(rng.IntN(400), 1+rng.IntN(30))...)
		maxTokens := 1 + rng.IntN(40)
		r := randomRequest{
			req: Request{
				PromptTokens: p,
				Params:       sample.Params{Seed: rng.Uint64()},
				HasSeed:      true,
				MaxTokens:    maxTokens,
				MinTokens:    rng.IntN(maxTokens + 1),
				IgnoreEOS:    rng.IntN(4) == 0,
			},
			abortAfter: -1,
			slowReader: rng.IntN(20) == 0,
		}
		switch rng.IntN(10) {
		case 0:
			r.abortAfter = 0
		case 1, 2:
			r.abortAfter = rng.IntN(maxTokens)
		}
		out[i] = r
	}
	return out
}

// eosAt makes EOS likely somewhere in a quarter of the sequences.
func eosAt(seed uint64, i int) bool { return seed%4 == 0 && i >= int(seed>>8%24) }

// TestRandomRequests runs 1,000 random requests through a pool small enough
// to force preemptions, with clients that abort at random points, and checks
// that every stream is right and that nothing leaks: blocks, sequences,
// goroutines. With overlap the checks are the same: the tokens a stream gets
// do not depend on how steps were scheduled.
func TestRandomRequests(t *testing.T) {
	for _, tc := range []struct {
		name        string
		numRequests int
		chunked     bool
		overlap     bool
	}{
		{"chunked prefill", 1000, true, false},
		{"whole prompts", 300, false, false},
		{"overlap, chunked prefill", 1000, true, true},
		{"overlap, whole prompts", 300, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			goroutinesBefore := runtime.NumGoroutine()
			d := newSim(t, sim.Options{EOSAt: eosAt})
			cfg := baseConfig()
			cfg.MaxNumSeqs = 16
			cfg.MaxNumBatchedTokens = 128
			cfg.ChunkedPrefill = tc.chunked
			cfg.NumBlocks = 40 // 160 tokens: a few sequences of up to 118 tokens fill it
			cfg.OverlapSchedule = tc.overlap
			e, err := New(cfg, d)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(3, uint64(tc.numRequests)))
			requests := makeRandomRequests(rng, tc.numRequests)

			var wg sync.WaitGroup
			errs := make(chan string, len(requests))
			for i := range requests {
				if i%50 == 0 {
					time.Sleep(time.Millisecond) // arrivals in bursts
				}
				r := &requests[i]
				s, err := e.Submit(&r.req)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					if msg := runClient(d, r, s); msg != "" {
						errs <- msg
					}
				}()
			}
			wg.Wait()
			close(errs)
			for msg := range errs {
				t.Error(msg)
			}

			settle(t, "an idle engine", func() bool {
				st := e.Stats()
				return st.NumRunning == 0 && st.NumWaiting == 0 && st.KVBlocksUsed == 0
			})
			st := e.Stats()
			if st.KVBlocksFree != cfg.NumBlocks {
				t.Errorf("%d of %d blocks free", st.KVBlocksFree, cfg.NumBlocks)
			}
			if st.NumPreemptions == 0 || st.PrefixHitTokens == 0 {
				t.Errorf("preemptions %d, prefix hits %d: the workload tests too little", st.NumPreemptions, st.PrefixHitTokens)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			if err := e.sched.Pool().CheckConsistency(); err != nil { // the loop has exited: no race
				t.Fatal(err)
			}
			if n := len(e.streams); n != 0 {
				t.Fatalf("%d streams still registered", n)
			}
			settle(t, "no leaked goroutine", func() bool { return runtime.NumGoroutine() <= goroutinesBefore })
			t.Logf("%d steps, %d preemptions, prefix hit %d of %d tokens",
				st.NumSteps, st.NumPreemptions, st.PrefixHitTokens, st.PrefixQueriedTokens)
		})
	}
}

// runClient reads s the way r's client does and returns what was wrong, or "".
func runClient(d *sim.Device, r *randomRequest, s *Stream) string {
	if r.abortAfter == 0 {
		s.Abort()
	}
	var outs []Output
	for o := range s.Outputs() {
		outs = append(outs, o)
		if len(outs) == r.abortAfter {
			s.Abort()
		}
		if r.slowReader {
			time.Sleep(100 * time.Microsecond)
		}
	}
	wantTokens, wantFinish := expectedTokens(d, r.req)
	n := len(outs)
	if n == 0 {
		return "stream closed without a final output"
	}
	last := outs[n-1]
	if last.Finished == FinishAbort {
		// Tokens emitted before the abort took effect may follow the
		// abortAfter-th in the buffer; they must still be the right ones.
		if r.abortAfter < 0 || last.Token != -1 {
			return "unexpected abort"
		}
		outs, wantTokens, wantFinish = outs[:n-1], wantTokens[:n-1], NotFinished
	}
	if len(outs) > len(wantTokens) {
		return "more tokens than expected"
	}
	for i, o := range outs {
		finish := NotFinished
		if i == len(wantTokens)-1 {
			finish = wantFinish
		}
		if o.Token != wantTokens[i] || o.Finished != finish {
			return "wrong token or finish reason"
		}
	}
	if last.Finished == NotFinished {
		return "stream closed without a finish reason"
	}
	if last.Finished != FinishAbort && len(outs) != len(wantTokens) {
		return "stream ended early"
	}
	tm := s.Timing()
	if len(tm.Tokens) < len(outs) || tm.Finished.Before(tm.Arrival) {
		return "timing incomplete"
	}
	return ""
}
