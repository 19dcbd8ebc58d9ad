package server

import (
	"context"

	"github.com/roseinfer/roseinfer/engine"
)

// choiceOutput is one engine output tagged with its choice, or the news that
// the choice's channel closed.
type choiceOutput struct {
	index  int
	out    engine.Output
	closed bool
}

// outputSource merges the outputs of a request's choices. With one choice
// (the common case) it reads the engine's channel directly, with no goroutine
// or extra channel hop per token; with several, one goroutine per choice
// forwards into a shared channel. Exactly one of single and merged is set: a
// nil channel in a select never fires.
type outputSource struct {
	single <-chan engine.Output
	merged chan choiceOutput
	quit   chan struct{}
}

func newOutputSource(choices []*choice) *outputSource {
	if len(choices) == 1 {
		return &outputSource{single: choices[0].stream.Outputs()}
	}
	src := &outputSource{merged: make(chan choiceOutput, 16*len(choices)), quit: make(chan struct{})}
	for _, c := range choices {
		go src.forward(c.index, c.stream.Outputs())
	}
	return src
}

func (src *outputSource) forward(index int, ch <-chan engine.Output) {
	for out := range ch {
		select {
		case src.merged <- choiceOutput{index: index, out: out}:
		case <-src.quit:
			return
		}
	}
	select {
	case src.merged <- choiceOutput{index: index, closed: true}:
	case <-src.quit:
	}
}

// next blocks for the next output; ok is false when ctx ended first (the
// client went away or the server is closing).
func (src *outputSource) next(ctx context.Context) (co choiceOutput, ok bool) {
	select {
	case out, open := <-src.single:
		return src.fromSingle(out, open), true
	case co = <-src.merged:
		return co, true
	case <-ctx.Done():
		return co, false
	}
}

// poll returns an output that is already waiting, if any.
func (src *outputSource) poll() (co choiceOutput, ok bool) {
	select {
	case out, open := <-src.single:
		return src.fromSingle(out, open), true
	case co = <-src.merged:
		return co, true
	default:
		return co, false
	}
}

func (src *outputSource) fromSingle(out engine.Output, open bool) choiceOutput {
	if !open {
		src.single = nil // closed: never select it again
		return choiceOutput{closed: true}
	}
	return choiceOutput{out: out}
}

// stop ends the forwarding goroutines.
func (src *outputSource) stop() {
	if src.quit != nil {
		close(src.quit)
	}
}
