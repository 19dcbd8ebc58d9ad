package server

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/engine"
)

// BenchmarkChunkEncode is the SSE hot path for one token: detokenize, stop
// check, append the chunk with continuous usage. It must not allocate.
func BenchmarkChunkEncode(b *testing.B) {
	tok := testTokenizer(b)
	ids := tok.Encode(script)
	enc := newChunkEncoder("cmpl-0123456789abcdef", 1700000000, "gpt2", false)
	c := newChoice(0, nil, tok.NewDetokenizer(), tok.EOS(), [][]byte{[]byte("zz top")}, 12, false)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c.add(engine.Output{Token: ids[i%len(ids)]})
		enc.appendChoiceChunk(c, c.sendableText(), "", chunkExtras{usage: &usage{PromptTokens: 12, CompletionTokens: i, TotalTokens: 12 + i}})
		c.sent()
		enc.buf = enc.buf[:0]
	}
}

// BenchmarkStreamHandler runs whole streaming requests through the handler
// with one token per chunk (the engine releases the next token only after
// the previous chunk was flushed, so nothing coalesces). The difference in
// allocs/op between the 1-token and the 256-token cases, divided by 255, is
// the server's per-token allocation rate.
func BenchmarkStreamHandler(b *testing.B) {
	tok := testTokenizer(b)
	for _, n := range []int{1, 256} {
		b.Run(fmt.Sprintf("tokens=%d", n), func(b *testing.B) {
			eng := &lockstepEngine{script: tok.Encode(script), release: make(chan struct{}, 1)}
			s, err := New(Config{MaxModelLen: 1024, VocabSize: 50257, Tokenizer: tok})
			if err != nil {
				b.Fatal(err)
			}
			s.SetEngine(eng)
			mux := s.mux()
			body := fmt.Sprintf(`{"prompt":[1,2,3],"max_tokens":%d,"stream":true,"stop":"zz top",
				"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`, n)
			b.ReportAllocs()
			for b.Loop() {
				w := discardWriter{header: http.Header{}, release: eng.release}
				mux.ServeHTTP(&w, httptest.NewRequest("POST", "/v1/completions", strings.NewReader(body)))
				if w.status != 200 {
					b.Fatal(w.status)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/token")
		})
	}
}

// lockstepEngine emits a token each time release is signalled.
type lockstepEngine struct {
	script  []int32
	release chan struct{}
}

func (e *lockstepEngine) Submit(req *engine.Request) (Stream, error) {
	st := &fakeStream{ch: make(chan engine.Output, req.MaxTokens+1), abort: make(chan struct{})}
	go func() {
		defer close(st.ch)
		for i := range req.MaxTokens {
			<-e.release
			out := engine.Output{Token: e.script[i%len(e.script)]}
			if i == req.MaxTokens-1 {
				out.Finished = engine.FinishLength
			}
			st.ch <- out
		}
	}()
	return st, nil
}

func (e *lockstepEngine) Stats() engine.Stats { return engine.Stats{} }

// discardWriter is a ResponseWriter that forgets the body (a recorder would
// count its own buffer growth).
type discardWriter struct {
	header  http.Header
	status  int
	release chan struct{} // signalled on every flush
}

func (w *discardWriter) Header() http.Header         { return w.header }
func (w *discardWriter) Write(p []byte) (int, error) { return io.Discard.Write(p) }
func (w *discardWriter) WriteHeader(status int)      { w.status = status }
func (w *discardWriter) Flush() {
	select {
	case w.release <- struct{}{}:
	default:
	}
}

// BenchmarkPlanTokenPrompt is the work between a request's arrival and
// engine.Submit for the harness's usual request: an 800-token prompt sent
// as a token-id list (decode the body, parse and check the ids, plan).
func BenchmarkPlanTokenPrompt(b *testing.B) {
	tok := testTokenizer(b)
	s, err := New(Config{MaxModelLen: 1024, VocabSize: 50257, Tokenizer: tok})
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]string, 800)
	for i := range ids {
		ids[i] = fmt.Sprint((i * 7919) % 50257)
	}
	body := `{"model":"gpt2","prompt":[` + strings.Join(ids, ",") + `],"max_tokens":128,"stream":true,` +
		`"temperature":0.7,"top_p":0.9,"top_k":50,"ignore_eos":true,"return_server_timing":true}`
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var req completionRequest
		if e := decodeJSON(strings.NewReader(body), &req); e != nil {
			b.Fatal(e)
		}
		if _, e := s.planCompletion(&req); e != nil {
			b.Fatal(e)
		}
	}
}
