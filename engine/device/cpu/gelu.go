package cpu

import "math"

// geluScale is sqrt(2/π) in GPT-2's tanh approximation.
var geluScale = math.Sqrt(2 / math.Pi)

// geluForward applies GPT-2's "gelu_new" (the tanh approximation,
// transformers' NewGELUActivation): out (N) = 0.5·x·(1 + tanh(sqrt(2/π)·(x +
// 0.044715·x³))). out may alias inp. tanh is evaluated in float64.
func geluForward(out, inp []float32, N int, p *pool) {
	p.parallel(N, 4096, 1, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			x := float64(inp[i])
			out[i] = float32(0.5 * x * (1 + math.Tanh(geluScale*(x+0.044715*x*x*x))))
		}
	})
}
