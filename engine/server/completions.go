package server

import (
	"net/http"
	"time"

	"github.com/roseinfer/roseinfer/engine"
)

// handleCompletions serves POST /v1/completions.
func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	arrival := time.Now()
	eng := s.currentEngine()
	if eng == nil {
		s.fail(w, errStarting)
		return
	}
	var req completionRequest
	if e := decodeJSON(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes), &req); e != nil {
		s.fail(w, e)
		return
	}
	p, e := s.planCompletion(&req)
	doneReading(r)
	if e != nil {
		s.fail(w, e)
		return
	}
	s.generate(w, r, eng, p, false, arrival)
}

// handleChatCompletions serves POST /v1/chat/completions. The messages are
// joined by a plain role-prefixed template (GPT-2 has no chat template).
func (s *Server) handleChatCompletions(w http.ResponseWriter, r *http.Request) {
	arrival := time.Now()
	eng := s.currentEngine()
	if eng == nil {
		s.fail(w, errStarting)
		return
	}
	var req chatRequest
	if e := decodeJSON(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes), &req); e != nil {
		s.fail(w, e)
		return
	}
	p, e := s.planChat(&req)
	doneReading(r)
	if e != nil {
		s.fail(w, e)
		return
	}
	s.generate(w, r, eng, p, true, arrival)
}

// fail answers with an error and counts it.
func (s *Server) fail(w http.ResponseWriter, e *Error) {
	s.metrics.errors.WithLabelValues(statusLabel(e.Status)).Inc()
	writeError(w, e)
}

// exchange is one generation request being answered.
type exchange struct {
	s       *Server
	w       http.ResponseWriter
	r       *http.Request
	p       *plan
	chat    bool
	arrival time.Time
	id      string
	created int64
	choices []*choice
}

// generate submits the plan's prompts and answers, streaming or not.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, eng Engine, p *plan, chat bool, arrival time.Time) {
	x := &exchange{s: s, w: w, r: r, p: p, chat: chat, arrival: arrival, created: time.Now().Unix()}
	if e := x.submit(eng); e != nil {
		s.fail(w, e)
		return
	}
	if chat {
		x.id = s.newRequestID("chatcmpl")
	} else {
		x.id = s.newRequestID("cmpl")
	}
	var gone bool
	if p.stream {
		gone = x.stream()
	} else {
		gone = x.respond()
	}
	x.finish(gone)
}

// submit hands every prompt to the engine; if one is refused, the others
// are aborted and the whole request fails.
func (x *exchange) submit(eng Engine) *Error {
	stops := make([][]byte, len(x.p.stops))
	for i, stop := range x.p.stops {
		stops[i] = []byte(stop)
	}
	for i, prompt := range x.p.prompts {
		req := x.p.engineRequest(i)
		if !req.HasSeed && x.s.cfg.HasBaseSeed {
			req.Params.Seed, req.HasSeed = splitmix64(x.s.cfg.BaseSeed+x.s.nextSeed.Add(1)), true
		}
		st, err := eng.Submit(req)
		if err != nil {
			for _, c := range x.choices {
				c.stream.Abort()
			}
			return fromSubmitError(err, len(prompt), x.p.maxTokens[i], x.s.cfg.MaxModelLen)
		}
		x.s.metrics.promptTokens.Add(float64(len(prompt)))
		x.choices = append(x.choices, newChoice(i, st, x.s.cfg.Tokenizer.NewDetokenizer(), x.s.cfg.Tokenizer.EOS(),
			stops, len(prompt), x.p.logprobs))
	}
	return nil
}

// collect runs the receive loop shared by both modes: it feeds outputs to
// their choices and calls emit whenever a choice has something to send (a
// streaming chunk is due, or the choice is complete). It returns false if
// the client went away first; then every choice has been aborted.
//
// Outputs already waiting are taken before emitting, so when the writer
// falls behind the engine one chunk carries several tokens instead of the
// backlog growing (as vLLM merges deltas).
func (x *exchange) collect(emit func(c *choice) bool) bool {
	src := newOutputSource(x.choices)
	defer src.stop()
	numOpen := len(x.choices)
	ctx := x.r.Context()
	for numOpen > 0 {
		co, ok := src.next(ctx)
		if !ok {
			x.abortAll()
			return false
		}
		x.apply(co)
		for range maxOutputsPerChunk {
			if co, ok = src.poll(); !ok {
				break
			}
			x.apply(co)
		}
		for _, c := range x.choices {
			if c.emitted || !x.isDue(c) {
				continue
			}
			if !emit(c) {
				x.abortAll()
				return false
			}
			if c.done && (c.closed || !x.p.serverTiming) {
				c.emitted = true
				numOpen--
			}
		}
	}
	return true
}

// maxOutputsPerChunk bounds how much backlog one chunk may absorb.
const maxOutputsPerChunk = 256

func (x *exchange) apply(co choiceOutput) {
	c := x.choices[co.index]
	if co.closed {
		c.closed = true
		if !c.done { // closed without a final output: treat as an engine failure
			c.finish, c.done = engine.FinishError, true
		}
		return
	}
	c.add(co.out)
}

// isDue says whether c should be emitted now. A streaming choice emits its
// first token at once, then every StreamInterval tokens; a finished choice
// emits once, after its channel closed if server timing is wanted.
func (x *exchange) isDue(c *choice) bool {
	if c.done {
		return c.closed || !x.p.serverTiming
	}
	if !x.p.stream || !c.hasTokens() {
		return false
	}
	return c.numChunks == 0 || len(c.tokenIDs) >= x.s.cfg.StreamInterval
}

func (x *exchange) abortAll() {
	for _, c := range x.choices {
		c.stream.Abort()
	}
}

// finish waits for the engine to close each finished choice (within a step)
// and records its metrics; a client that left only counts as aborted.
func (x *exchange) finish(clientGone bool) {
	for _, c := range x.choices {
		if clientGone {
			x.s.metrics.requests.WithLabelValues("client_gone").Inc()
			continue
		}
		if !c.closed {
			for range c.stream.Outputs() {
			}
			c.closed = true
		}
		x.s.metrics.observe(x.arrival, c.stream.Timing(), c)
	}
}

// usage sums the choices' token counts: the final usage of a request whose
// choices have all finished. The cached-token count comes from each choice's
// engine Timing, complete once its last output was received.
func (x *exchange) usage() usage {
	u := usage{PromptTokensDetails: &promptTokensDetails{}}
	for _, c := range x.choices {
		u.PromptTokens += c.numPromptTokens
		u.CompletionTokens += c.numTokens
		u.PromptTokensDetails.CachedTokens += c.stream.Timing().NumCachedTokens
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// timing is the server_timing of a single-choice request that asked for it.
func (x *exchange) timing() *serverTiming {
	if !x.p.serverTiming {
		return nil
	}
	c := x.choices[0]
	return newServerTiming(x.arrival, c.stream.Timing(), c.numTokens)
}

// failure maps a finish the client did not cause to an error.
func failure(c *choice) *Error {
	switch c.finish {
	case engine.FinishAbort:
		return errShuttingDown
	case engine.FinishError:
		return errEngineFailed
	}
	return nil
}

// splitmix64 spreads consecutive integers into unrelated seeds.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
