// Package sample holds a request's sampling parameters and the CPU reference
// sampler. It imports nothing from the engine: devices and the scheduler both
// depend on it, never the other way round.
package sample

// Params are the per-request sampling settings, already validated by the
// server (temperature >= 0, 0 < TopP <= 1, TopK >= -1).
//
// Randomness is an argument, not hidden state (llm.c's habit): a draw for the
// n-th generated token of a request is a pure function of (Seed, n), so a
// request with a seed gives the same output alone, in a batch, after a
// preemption, and on every device.
type Params struct {
	Temperature float32 // 0 = greedy (argmax)
	TopK        int     // <= 0 = off (the API's -1 and 0 both mean off)
	TopP        float32 // 1 = off
	Seed        uint64  // the engine assigns a random one when the request has none
}

// IsGreedy reports whether sampling reduces to argmax.
func (p Params) IsGreedy() bool { return p.Temperature <= 0 || p.TopK == 1 }
