package engine

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/roseinfer/roseinfer/engine/device"
	"github.com/roseinfer/roseinfer/engine/device/sim"
)

const (
	testVocab = 1000
	testEOS   = 999
)

func baseConfig() Config {
	return Config{
		MaxNumSeqs:          8,
		MaxNumBatchedTokens: 64,
		PrefillChunkSize:    16,
		ChunkedPrefill:      true,
		BlockSizeTokens:     4,
		NumBlocks:           64,
		PrefixCache:         true,
		MaxModelLen:         128,
		EOSToken:            testEOS,
	}
}

func newSim(t *testing.T, opts sim.Options) *sim.Device {
	t.Helper()
	opts.VocabSize, opts.EOS = testVocab, testEOS
	d, err := sim.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func newEngine(t *testing.T, cfg Config, dev device.Device) *Engine {
	t.Helper()
	e, err := New(cfg, dev)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func prompt(first, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(first + i)
	}
	return out
}

// collect reads a stream to its end.
func collect(t *testing.T, s *Stream) []Output {
	t.Helper()
	var outs []Output
	timeout := time.After(time.Minute)
	for {
		select {
		case o, ok := <-s.Outputs():
			if !ok {
				return outs
			}
			outs = append(outs, o)
		case <-timeout:
			t.Fatalf("stream did not end; %d outputs so far", len(outs))
		}
	}
}

// settle retries check until it passes or a few seconds went by: the loop
// publishes statistics and exits goroutines a moment after the last Output.
func settle(t *testing.T, what string, check func() bool) {
	t.Helper()
	for range 500 {
		if check() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never happened", what)
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Config)
	}{
		{"no KV blocks", func(c *Config) { c.NumBlocks = 0 }},
		{"no context length", func(c *Config) { c.MaxModelLen = 0 }},
		{"unchunked budget below the context", func(c *Config) { c.ChunkedPrefill = false; c.MaxNumBatchedTokens = 100 }},
		{"budget below max sequences", func(c *Config) { c.MaxNumSeqs = 100 }},
		{"negative block size", func(c *Config) { c.BlockSizeTokens = -1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig()
			tc.change(&cfg)
			if e, err := New(cfg, newSim(t, sim.Options{})); err == nil {
				e.Close()
				t.Fatal("want an error")
			}
		})
	}
}

func TestSubmitRejectsBadRequests(t *testing.T) {
	cfg := baseConfig()
	cfg.NumBlocks = 8 // 32 tokens of KV, less than the 128-token context
	e := newEngine(t, cfg, newSim(t, sim.Options{}))
	for _, tc := range []struct {
		name    string
		req     *Request
		wantErr error // nil: any error
	}{
		{"nil request", nil, nil},
		{"empty prompt", &Request{MaxTokens: 1}, nil},
		{"zero max_tokens", &Request{PromptTokens: prompt(1, 3)}, nil},
		{"negative token id", &Request{PromptTokens: []int32{1, -5}, MaxTokens: 1}, nil},
		{"over the context", &Request{PromptTokens: prompt(1, 100), MaxTokens: 29}, ErrTooLong},
		{"over the KV pool", &Request{PromptTokens: prompt(1, 20), MaxTokens: 14}, ErrTooLong},
		// prompt + max_tokens wraps negative: must not pass the context check
		// and reach make(chan Output, MaxTokens+1).
		{"max_tokens near 2^63", &Request{PromptTokens: prompt(1, 3), MaxTokens: math.MaxInt}, ErrTooLong},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Submit(tc.req)
			if err == nil || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
		})
	}
	// Exactly filling the pool is fine: the last token needs no KV.
	s, err := e.Submit(&Request{PromptTokens: prompt(1, 20), MaxTokens: 13})
	if err != nil {
		t.Fatal(err)
	}
	if outs := collect(t, s); len(outs) != 13 {
		t.Fatalf("%d outputs, want 13", len(outs))
	}
}

func TestSubmitAfterCloseFails(t *testing.T) {
	e := newEngine(t, baseConfig(), newSim(t, sim.Options{}))
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := e.Submit(&Request{PromptTokens: prompt(1, 3), MaxTokens: 2}); !errors.Is(err, ErrClosed) {
		t.Fatalf("err = %v, want ErrClosed", err)
	}
}

// expectedTokens is what the sim device generates for a request, applying
// the engine's stop rules independently of the engine's code.
func expectedTokens(d *sim.Device, req Request) ([]int32, FinishReason) {
	var toks []int32
	for i := 0; i < req.MaxTokens; i++ {
		banned := int32(-1)
		if !req.IgnoreEOS && i < req.MinTokens {
			banned = testEOS
		}
		tok := d.Token(req.Params.Seed, i, banned)
		toks = append(toks, tok)
		if tok == testEOS && !req.IgnoreEOS {
			return toks, FinishStop
		}
	}
	return toks, FinishLength
}

// checkOutputs compares a finished stream with the expected tokens.
func checkOutputs(t *testing.T, outs []Output, wantTokens []int32, wantFinish FinishReason) {
	t.Helper()
	if len(outs) != len(wantTokens) {
		t.Fatalf("%d outputs, want %d", len(outs), len(wantTokens))
	}
	for i, o := range outs {
		want := NotFinished
		if i == len(outs)-1 {
			want = wantFinish
		}
		if o.Token != wantTokens[i] || o.Finished != want {
			t.Fatalf("output %d = token %d finished %v, want token %d finished %v", i, o.Token, o.Finished, wantTokens[i], want)
		}
	}
}

func TestStopRules(t *testing.T) {
	eosFrom2 := func(_ uint64, i int) bool { return i >= 2 }
	for _, tc := range []struct {
		name       string
		req        Request
		wantLen    int
		wantFinish FinishReason
	}{
		{"max_tokens before EOS", Request{MaxTokens: 2}, 2, FinishLength},
		{"EOS as the last allowed token is a stop", Request{MaxTokens: 3}, 3, FinishStop},
		{"EOS stops", Request{MaxTokens: 10}, 3, FinishStop},
		{"ignore_eos streams exactly max_tokens", Request{MaxTokens: 10, IgnoreEOS: true}, 10, FinishLength},
		{"min_tokens bans EOS until reached", Request{MaxTokens: 10, MinTokens: 6}, 7, FinishStop},
		{"min_tokens equal to max_tokens", Request{MaxTokens: 4, MinTokens: 4}, 4, FinishLength},
		{"single token", Request{MaxTokens: 1}, 1, FinishLength},
	} {
		for _, overlap := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/overlap=%v", tc.name, overlap), func(t *testing.T) {
				cfg := baseConfig()
				cfg.OverlapSchedule = overlap
				d := newSim(t, sim.Options{EOSAt: eosFrom2})
				e := newEngine(t, cfg, d)
				req := tc.req
				req.PromptTokens = prompt(10, 7)
				req.HasSeed, req.Params.Seed = true, 1234
				s, err := e.Submit(&req)
				if err != nil {
					t.Fatal(err)
				}
				outs := collect(t, s)
				wantTokens, wantFinish := expectedTokens(d, req)
				if len(wantTokens) != tc.wantLen || wantFinish != tc.wantFinish {
					t.Fatalf("test table is wrong: reference gives %d tokens, %v", len(wantTokens), wantFinish)
				}
				checkOutputs(t, outs, wantTokens, wantFinish)
				tm := s.Timing()
				if len(tm.Tokens) != len(outs) || tm.FirstScheduled.Before(tm.Arrival) || tm.Tokens[0].Before(tm.FirstScheduled) || tm.Finished.Before(tm.Tokens[len(tm.Tokens)-1]) {
					t.Fatalf("timing out of order or incomplete: %+v", tm)
				}
			})
		}
	}
}

func TestUnseededRequestsGetDifferentSeeds(t *testing.T) {
	e := newEngine(t, baseConfig(), newSim(t, sim.Options{}))
	var runs [][]Output
	for range 2 {
		s, err := e.Submit(&Request{PromptTokens: prompt(1, 4), MaxTokens: 8})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, collect(t, s))
	}
	same := true
	for i := range runs[0] {
		same = same && runs[0][i].Token == runs[1][i].Token
	}
	if same {
		t.Fatal("two unseeded requests drew the same 8 tokens")
	}
}

// gatedDevice holds every Forward until the test releases it.
type gatedDevice struct {
	device.Device
	entered, release chan struct{}
}

func (g *gatedDevice) Forward(b *device.Batch, out []device.Sampled) ([]device.Sampled, error) {
	g.entered <- struct{}{}
	<-g.release
	return g.Device.Forward(b, out)
}

func TestOverloadAndAbortWithinAStep(t *testing.T) {
	cfg := baseConfig()
	cfg.MaxPending = 2
	g := &gatedDevice{Device: newSim(t, sim.Options{}), entered: make(chan struct{}), release: make(chan struct{})}
	e := newEngine(t, cfg, g)
	req := &Request{PromptTokens: prompt(1, 4), MaxTokens: 50}
	first, err := e.Submit(req)
	if err != nil {
		t.Fatal(err)
	}
	<-g.entered // the loop is inside the first step and takes in nothing now
	var queued []*Stream
	for range 2 {
		s, err := e.Submit(req)
		if err != nil {
			t.Fatal(err)
		}
		queued = append(queued, s)
	}
	if _, err := e.Submit(req); !errors.Is(err, ErrOverloaded) {
		t.Fatalf("third pending request: err = %v, want ErrOverloaded", err)
	}
	if st := e.Stats(); st.NumWaiting != 2 {
		t.Fatalf("stats say %d waiting, want 2", st.NumWaiting)
	}
	// Abort while the step that computes first's token runs: the token is
	// not delivered; the stream ends at once.
	first.Abort()
	first.Abort()
	g.release <- struct{}{}
	outs := collect(t, first)
	if len(outs) != 1 || outs[0].Finished != FinishAbort || outs[0].Token != -1 {
		t.Fatalf("aborted stream got %+v", outs)
	}
	queued[0].Abort() // still waiting: ends without ever running
	go func() {
		for range g.entered {
			g.release <- struct{}{}
		}
	}()
	if outs := collect(t, queued[0]); len(outs) != 1 || outs[0].Finished != FinishAbort {
		t.Fatalf("aborted waiting stream got %+v", outs)
	}
	if outs := collect(t, queued[1]); len(outs) != 50 {
		t.Fatalf("%d outputs, want 50", len(outs))
	}
	settle(t, "all blocks free", func() bool { return e.Stats().KVBlocksUsed == 0 })
	queued[1].Abort() // after the end: harmless
	e.Close()
	close(g.entered)
}

// failingDevice fails every Forward.
type failingDevice struct{ device.Device }

func (failingDevice) Forward(*device.Batch, []device.Sampled) ([]device.Sampled, error) {
	return nil, errors.New("device on fire")
}

func TestDeviceErrorEndsTheStepsRequests(t *testing.T) {
	e := newEngine(t, baseConfig(), failingDevice{newSim(t, sim.Options{})})
	s, err := e.Submit(&Request{PromptTokens: prompt(1, 4), MaxTokens: 5})
	if err != nil {
		t.Fatal(err)
	}
	if outs := collect(t, s); len(outs) != 1 || outs[0].Finished != FinishError {
		t.Fatalf("got %+v, want one FinishError output", outs)
	}
	settle(t, "all blocks free", func() bool { return e.Stats().KVBlocksUsed == 0 })
}

func TestCloseAbortsLiveRequestsAndStops(t *testing.T) {
	for _, overlap := range []bool{false, true} {
		t.Run(fmt.Sprintf("overlap=%v", overlap), func(t *testing.T) { testCloseAbortsLiveRequestsAndStops(t, overlap) })
	}
}

func testCloseAbortsLiveRequestsAndStops(t *testing.T, overlap bool) {
	before := runtime.NumGoroutine()
	cfg := baseConfig()
	cfg.OverlapSchedule = overlap
	e, err := New(cfg, newSim(t, sim.Options{StepDuration: time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.Submit(&Request{PromptTokens: prompt(1, 4), MaxTokens: 100, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	<-s.Outputs()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	outs := collect(t, s)
	if len(outs) == 0 || outs[len(outs)-1].Finished != FinishAbort {
		t.Fatalf("live stream did not end with an abort: %+v", outs)
	}
	settle(t, "the loop goroutine to exit", func() bool { return runtime.NumGoroutine() <= before })
}

func TestIdleEngineDoesNotStep(t *testing.T) {
	for _, overlap := range []bool{false, true} {
		t.Run(fmt.Sprintf("overlap=%v", overlap), func(t *testing.T) { testIdleEngineDoesNotStep(t, overlap) })
	}
}

func testIdleEngineDoesNotStep(t *testing.T, overlap bool) {
	cfg := baseConfig()
	cfg.OverlapSchedule = overlap
	e := newEngine(t, cfg, newSim(t, sim.Options{}))
	s, err := e.Submit(&Request{PromptTokens: prompt(1, 4), MaxTokens: 3})
	if err != nil {
		t.Fatal(err)
	}
	collect(t, s)
	settle(t, "idle statistics", func() bool { return e.Stats().NumRunning == 0 })
	steps := e.Stats().NumSteps
	time.Sleep(50 * time.Millisecond)
	if got := e.Stats().NumSteps; got != steps {
		t.Fatalf("an idle engine ran %d steps", got-steps)
	}
}

// The engine loop must not allocate per token: a long request costs about
// the same number of allocations as a short one.
func TestNoPerTokenAllocations(t *testing.T) {
	for _, overlap := range []bool{false, true} {
		t.Run(fmt.Sprintf("overlap=%v", overlap), func(t *testing.T) { testNoPerTokenAllocations(t, overlap) })
	}
}

func testNoPerTokenAllocations(t *testing.T, overlap bool) {
	cfg := baseConfig()
	cfg.OverlapSchedule = overlap
	e := newEngine(t, cfg, newSim(t, sim.Options{}))
	mallocs := func(maxTokens int) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s, err := e.Submit(&Request{PromptTokens: prompt(1, 8), MaxTokens: maxTokens, IgnoreEOS: true, HasSeed: true})
		if err != nil {
			t.Fatal(err)
		}
		for range s.Outputs() {
		}
		runtime.ReadMemStats(&after)
		return after.Mallocs - before.Mallocs
	}
	mallocs(100) // warm up the loop's reusable buffers
	short, long := mallocs(2), mallocs(102)
	if long > short+20 {
		t.Fatalf("100 more tokens cost %d more allocations", long-short)
	}
}

// TestSecondaryStopToken: a StopTokens id ends a request like EOS, unless
// ignore_eos; within min_tokens it is an ordinary token, since the device
// bans EOS only.
func TestSecondaryStopToken(t *testing.T) {
	const stop2 = testEOS - 1
	eosFrom2 := func(_ uint64, i int) bool { return i >= 2 }
	for _, tc := range []struct {
		name       string
		req        Request
		wantLen    int
		wantFinish FinishReason
	}{
		{"stop id stops", Request{MaxTokens: 10}, 3, FinishStop},
		{"ignore_eos ignores it", Request{MaxTokens: 10, IgnoreEOS: true}, 10, FinishLength},
		{"kept within min_tokens", Request{MaxTokens: 10, MinTokens: 6}, 7, FinishStop},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig()
			cfg.StopTokens = []int32{stop2}
			d, err := sim.New(sim.Options{VocabSize: testVocab, EOS: stop2, EOSAt: eosFrom2})
			if err != nil {
				t.Fatal(err)
			}
			e := newEngine(t, cfg, d)
			req := tc.req
			req.PromptTokens = prompt(10, 7)
			req.HasSeed, req.Params.Seed = true, 1234
			s, err := e.Submit(&req)
			if err != nil {
				t.Fatal(err)
			}
			outs := collect(t, s)
			if len(outs) != tc.wantLen || outs[len(outs)-1].Finished != tc.wantFinish {
				t.Fatalf("%d outputs, last %+v; want %d, %v", len(outs), outs[len(outs)-1], tc.wantLen, tc.wantFinish)
			}
			if !tc.req.IgnoreEOS && outs[len(outs)-1].Token != stop2 {
				t.Fatalf("last token %d, want %d", outs[len(outs)-1].Token, stop2)
			}
		})
	}
}
