package engine

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/roseinfer/roseinfer/engine/device"
	"github.com/roseinfer/roseinfer/engine/device/cpu"
	"github.com/roseinfer/roseinfer/engine/device/sim"
)

// countingDevice records how many steps the engine had on the device at
// once. Only the engine loop calls it; read it after Close.
type countingDevice struct {
	*sim.Device
	numInFlight, maxInFlight, numSubmits int
}

func (c *countingDevice) Submit(b *device.Batch) error {
	c.numSubmits++
	c.numInFlight++
	c.maxInFlight = max(c.maxInFlight, c.numInFlight)
	return c.Device.Submit(b)
}

func (c *countingDevice) Collect(out []device.Sampled) ([]device.Sampled, error) {
	c.numInFlight--
	return c.Device.Collect(out)
}

// result is what a client saw: its tokens and how the stream ended.
type result struct {
	tokens []int32
	finish FinishReason
}

// runWorkload submits reqs at once and reads every stream to its end.
func runWorkload(t *testing.T, e *Engine, reqs []Request) []result {
	t.Helper()
	streams := submitAll(t, e, reqs)
	out := make([]result, len(reqs))
	for i, s := range streams {
		outs := collect(t, s)
		for _, o := range outs {
			if o.Token >= 0 {
				out[i].tokens = append(out[i].tokens, o.Token)
			}
		}
		out[i].finish = outs[len(outs)-1].Finished
		if tm := s.Timing(); len(tm.Tokens) != len(out[i].tokens) || tm.FirstScheduled.Before(tm.Arrival) ||
			(len(tm.Tokens) > 0 && (tm.Tokens[0].Before(tm.FirstScheduled) || tm.Finished.Before(tm.Tokens[len(tm.Tokens)-1]))) {
			t.Fatalf("request %d: timing out of order or incomplete: %+v", i, tm)
		}
	}
	return out
}

// TestOverlapMatchesSync runs the same random workload (EOS and min_tokens
// stops, ignore_eos, chunked and whole prefill, prefix hits, preemptions)
// with and without overlap on the sim device: every stream must get the
// same tokens and finish reason, and overlap must really keep two steps on
// the device.
func TestOverlapMatchesSync(t *testing.T) {
	for _, chunked := range []bool{true, false} {
		rng := rand.New(rand.NewPCG(5, 8))
		var reqs []Request
		for _, r := range makeRandomRequests(rng, 200) {
			reqs = append(reqs, r.req)
		}
		var results [2][]result
		var stats [2]Stats
		var dev [2]*countingDevice
		for i, overlap := range []bool{false, true} {
			cfg := baseConfig()
			cfg.MaxNumSeqs, cfg.MaxNumBatchedTokens, cfg.NumBlocks = 16, 128, 40
			cfg.ChunkedPrefill, cfg.OverlapSchedule = chunked, overlap
			dev[i] = &countingDevice{Device: newSim(t, sim.Options{EOSAt: eosAt})}
			e := newEngine(t, cfg, dev[i])
			results[i] = runWorkload(t, e, reqs)
			settle(t, "all blocks free", func() bool { return e.Stats().KVBlocksUsed == 0 })
			stats[i] = e.Stats()
			e.Close()
		}
		for i := range reqs {
			sync, overlap := results[0][i], results[1][i]
			if !slices.Equal(sync.tokens, overlap.tokens) || sync.finish != overlap.finish {
				t.Fatalf("chunked=%v request %d: sync %v %v, overlap %v %v", chunked, i, sync.tokens, sync.finish, overlap.tokens, overlap.finish)
			}
		}
		if st := stats[1]; st.NumPreemptions == 0 || st.PrefixHitTokens == 0 || st.KVBlocksFree != 40 || st.NumRunning+st.NumWaiting != 0 {
			t.Fatalf("chunked=%v overlap stats %+v: the workload tests too little or something leaked", chunked, st)
		}
		if dev[0].numSubmits != 0 || dev[1].maxInFlight != 2 {
			t.Fatalf("chunked=%v: sync submitted %d steps; overlap had at most %d in flight, want 2", chunked, dev[0].numSubmits, dev[1].maxInFlight)
		}
		t.Logf("chunked=%v: sync %d steps, overlap %d steps, %d preemptions", chunked, stats[0].NumSteps, stats[1].NumSteps, stats[1].NumPreemptions)
	}
}

// TestOverlapMatchesSyncOnCPU: the tiny model on the CPU device gives the
// same tokens (greedy and seeded) with overlap as without, where the tokens
// fed from the previous step really go through the model.
func TestOverlapMatchesSyncOnCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the tiny model on the CPU")
	}
	reqs := batchRequests()
	for _, tc := range []struct {
		name           string
		cfg            Config
		wantPreemption bool
	}{
		{"whole prompts, prefix cache", Config{MaxNumSeqs: 32, MaxNumBatchedTokens: 1024, BlockSizeTokens: 4, NumBlocks: 256, PrefixCache: true}, false},
		{"chunked prefill, preemptions", Config{MaxNumSeqs: 32, MaxNumBatchedTokens: 64, PrefillChunkSize: 16, ChunkedPrefill: true, BlockSizeTokens: 4, NumBlocks: 40, PrefixCache: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			syncEngine := newCPUEngine(t, tc.cfg)
			want, _ := generate(t, syncEngine, reqs)
			syncEngine.Close()

			cfg := tc.cfg
			cfg.OverlapSchedule = true
			e := newAsyncCPUEngine(t, cfg)
			got, _ := generate(t, e, reqs)
			for i := range reqs {
				if !slices.Equal(got[i], want[i]) {
					t.Errorf("request %d: overlap %v, sync %v", i, got[i], want[i])
				}
			}
			settle(t, "all blocks free", func() bool { return e.Stats().KVBlocksUsed == 0 })
			if st := e.Stats(); tc.wantPreemption != (st.NumPreemptions > 0) {
				t.Errorf("%d preemptions", st.NumPreemptions)
			}
		})
	}
}

// newAsyncCPUEngine is newCPUEngine over the CPU device's Async wrapper.
func newAsyncCPUEngine(t *testing.T, cfg Config) *Engine {
	t.Helper()
	dev := tinyCPUDevice(t, &cfg)
	return newEngine(t, cfg, cpu.NewAsync(dev))
}

// gatedCollect holds every Collect until the test releases it.
type gatedCollect struct {
	*sim.Device
	entered, release chan struct{}
}

func (g *gatedCollect) Collect(out []device.Sampled) ([]device.Sampled, error) {
	g.entered <- struct{}{}
	<-g.release
	return g.Device.Collect(out)
}

// An abort while the sequence has steps on the device ends the stream at
// once but frees its blocks only after the last of those steps is collected.
func TestOverlapAbortWaitsForStepsInFlight(t *testing.T) {
	cfg := baseConfig()
	cfg.OverlapSchedule = true
	g := &gatedCollect{Device: newSim(t, sim.Options{}), entered: make(chan struct{}), release: make(chan struct{})}
	e := newEngine(t, cfg, g)
	s, err := e.Submit(&Request{PromptTokens: prompt(1, 9), MaxTokens: 50, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	<-g.entered // the prefill and the first decode are submitted; the loop waits for the prefill
	s.Abort()
	g.release <- struct{}{}
	if outs := collect(t, s); len(outs) != 1 || outs[0].Finished != FinishAbort || outs[0].Token != -1 {
		t.Fatalf("aborted stream got %+v", outs)
	}
	<-g.entered // the loop collects the decode step
	settle(t, "published statistics", func() bool { return e.Stats().NumRunning == 0 })
	if st := e.Stats(); st.KVBlocksUsed != 3 {
		t.Fatalf("%d blocks used while a step of the aborted sequence is on the device, want its 3", st.KVBlocksUsed)
	}
	g.release <- struct{}{}
	settle(t, "all blocks free", func() bool { return e.Stats().KVBlocksUsed == 0 })
	go func() { // Close collects nothing more, but be safe
		for range g.entered {
			g.release <- struct{}{}
		}
	}()
	e.Close()
	close(g.entered)
}

// failingAsync fails the Submit or the Collect of the step numbered failAt.
type failingAsync struct {
	*sim.Device
	failSubmit       bool
	failAt, numSteps int
	numCollects      int
}

func (f *failingAsync) Submit(b *device.Batch) error {
	f.numSteps++
	if f.failSubmit && f.numSteps == f.failAt {
		return errors.New("device on fire")
	}
	return f.Device.Submit(b)
}

func (f *failingAsync) Collect(out []device.Sampled) ([]device.Sampled, error) {
	f.numCollects++
	out, err := f.Device.Collect(out)
	if !f.failSubmit && f.numCollects == f.failAt {
		return out, errors.New("device on fire")
	}
	return out, err
}

// A device error with overlap ends the failed step's sequences with
// FinishError after the tokens of the steps before it, and frees their blocks.
func TestOverlapDeviceErrors(t *testing.T) {
	for _, tc := range []struct {
		name       string
		failSubmit bool
	}{
		{"submit fails", true},
		{"collect fails", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig()
			cfg.OverlapSchedule = true
			d := &failingAsync{Device: newSim(t, sim.Options{}), failSubmit: tc.failSubmit, failAt: 4}
			e := newEngine(t, cfg, d)
			req := Request{PromptTokens: prompt(1, 4), MaxTokens: 10, IgnoreEOS: true, HasSeed: true}
			s, err := e.Submit(&req)
			if err != nil {
				t.Fatal(err)
			}
			outs := collect(t, s)
			want, _ := expectedTokens(d.Device, req)
			// Steps 1-3 delivered their tokens; step 4 failed.
			if len(outs) != 4 || outs[3].Finished != FinishError || outs[3].Token != -1 {
				t.Fatalf("got %+v, want 3 tokens then FinishError", outs)
			}
			for i := range 3 {
				if outs[i].Token != want[i] || outs[i].Finished != NotFinished {
					t.Fatalf("output %d = %+v, want token %d", i, outs[i], want[i])
				}
			}
			settle(t, "all blocks free", func() bool { return e.Stats().KVBlocksUsed == 0 })
			// The engine goes on serving.
			req.Params.Seed = 7
			if outs := collect(t, mustSubmit(t, e, &req)); len(outs) != 10 || outs[9].Finished != FinishLength {
				t.Fatalf("after the error: %d outputs, last %+v", len(outs), outs[len(outs)-1])
			}
		})
	}
}

func mustSubmit(t *testing.T, e *Engine, req *Request) *Stream {
	t.Helper()
	s, err := e.Submit(req)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
