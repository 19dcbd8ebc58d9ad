package cpu

import "math"

// swigluForward is the gated MLP activation of Qwen3 (and Llama): out (N,
// I) = SiLU(gate) · up, where each row of inp (N, 2I) holds gate (first I)
// and up (last I) side by side, as the stacked gate|up matmul writes them.
// SiLU(x) = x·sigmoid(x), evaluated in float64.
func swigluForward(out, inp []float32, N, I int, p *pool) {
	p.parallel(N, 16, 1, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			gate, up := inp[i*2*I:i*2*I+I], inp[i*2*I+I:(i+1)*2*I]
			o := out[i*I : (i+1)*I]
			for c, g := range gate {
				x := float64(g)
				o[c] = float32(x/(1+math.Exp(-x))) * up[c]
			}
		}
	})
}
