package server

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roseinfer/roseinfer/engine"
	"github.com/roseinfer/roseinfer/engine/tokenizer"
)

// fakeEngine answers instantly with a fixed script of tokens, so handler and
// fuzz tests exercise the server alone. The end-to-end tests in
// e2e_test.go use the real engine with the sim device instead.
type fakeEngine struct {
	script     []int32 // token i of every request is script[i % len]
	eosAt      int     // index at which EOS is emitted unless ignore_eos (0 = never)
	eos        int32
	overloaded atomic.Bool // Submit fails with ErrOverloaded
	tokenDelay time.Duration

	mu        sync.Mutex
	submitted []*engine.Request
	open      int // streams not yet closed
}

func newFakeEngine(t testing.TB, text string) *fakeEngine {
	tok := testTokenizer(t)
	return &fakeEngine{script: tok.Encode(text), eos: tok.EOS()}
}

func testTokenizer(t testing.TB) *tokenizer.Tokenizer {
	t.Helper()
	tok, err := tokenizer.Default()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

type fakeStream struct {
	ch      chan engine.Output
	abort   chan struct{}
	once    sync.Once
	timing  engine.Timing
	aborted atomic.Bool
}

func (f *fakeEngine) Submit(req *engine.Request) (Stream, error) {
	if f.overloaded.Load() {
		return nil, engine.ErrOverloaded
	}
	f.mu.Lock()
	f.submitted = append(f.submitted, req)
	f.open++
	f.mu.Unlock()
	st := &fakeStream{ch: make(chan engine.Output, req.MaxTokens+1), abort: make(chan struct{})}
	st.timing.Arrival = time.Now()
	if f.tokenDelay == 0 {
		f.run(req, st)
	} else {
		go f.run(req, st)
	}
	return st, nil
}

// run emits the script, as the engine would: one Output per token, the last
// one finished, then close.
func (f *fakeEngine) run(req *engine.Request, st *fakeStream) {
	defer func() {
		st.timing.Finished = time.Now()
		close(st.ch)
		f.mu.Lock()
		f.open--
		f.mu.Unlock()
	}()
	st.timing.FirstScheduled = time.Now()
	for i := 0; i < req.MaxTokens; i++ {
		if f.tokenDelay > 0 {
			select {
			case <-time.After(f.tokenDelay):
			case <-st.abort:
				st.ch <- engine.Output{Token: -1, Finished: engine.FinishAbort, At: time.Now()}
				return
			}
		}
		out := engine.Output{Token: f.script[i%len(f.script)], Logprob: -0.5, At: time.Now()}
		if f.eosAt > 0 && i == f.eosAt && !req.IgnoreEOS && i >= req.MinTokens {
			out.Token, out.Finished = f.eos, engine.FinishStop
		} else if i == req.MaxTokens-1 {
			out.Finished = engine.FinishLength
		}
		st.timing.Tokens = append(st.timing.Tokens, out.At)
		st.ch <- out
		if out.Finished != engine.NotFinished {
			return
		}
	}
}

func (f *fakeEngine) Stats() engine.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return engine.Stats{NumRunning: f.open, KVBlocksFree: 100}
}

func (f *fakeEngine) lastRequest() *engine.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.submitted[len(f.submitted)-1]
}

func (st *fakeStream) Outputs() <-chan engine.Output { return st.ch }
func (st *fakeStream) Abort() {
	st.aborted.Store(true)
	st.once.Do(func() { close(st.abort) })
}
func (st *fakeStream) Timing() engine.Timing { return st.timing }
