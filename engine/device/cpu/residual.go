package cpu

// residualForward adds the residual stream: out (N) = inp1 + inp2. out may
// alias inp1 (the stream is updated in place).
func residualForward(out, inp1, inp2 []float32, N int) {
	out, inp1, inp2 = out[:N], inp1[:N], inp2[:N]
	for i := range out {
		out[i] = inp1[i] + inp2[i]
	}
}
