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
