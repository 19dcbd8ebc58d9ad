package server

import "github.com/roseinfer/roseinfer/engine"

// Engine is the part of *engine.Engine the server uses. It is an interface
// for two reasons: the server opens before the model is loaded (it answers
// 503 until SetEngine), and the fuzz test drives the handlers with an
// instant fake so that a million executions take minutes, not hours.
type Engine interface {
	Submit(req *engine.Request) (Stream, error)
	Stats() engine.Stats
}

// Stream is the part of *engine.Stream the server uses.
type Stream interface {
	Outputs() <-chan engine.Output
	Abort()
	Timing() engine.Timing
}

// FromEngine adapts the real engine to Engine.
func FromEngine(e *engine.Engine) Engine { return engineAdapter{e} }

type engineAdapter struct{ e *engine.Engine }

func (a engineAdapter) Submit(req *engine.Request) (Stream, error) {
	st, err := a.e.Submit(req)
	if err != nil {
		return nil, err // not a typed nil inside the interface
	}
	return st, nil
}

func (a engineAdapter) Stats() engine.Stats { return a.e.Stats() }
