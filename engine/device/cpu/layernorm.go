package cpu

import "math"

// layernormForward normalises each row of inp (N, C) to zero mean and unit
// variance (biased, as torch's LayerNorm), then scales by weight (C) and
// shifts by bias (C): out (N, C). Statistics accumulate in float64, which
// keeps the result within fp32 rounding of torch's.
func layernormForward(out, inp, weight, bias []float32, eps float32, N, C int, p *pool) {
	p.parallel(N, 16, 1, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			x := inp[i*C : (i+1)*C]
			sum := 0.0
			for _, v := range x {
				sum += float64(v)
			}
			mean := sum / float64(C)
			variance := 0.0
			for _, v := range x {
				d := float64(v) - mean
				variance += d * d
			}
			variance /= float64(C)
			rstd := 1 / math.Sqrt(variance+float64(eps))
			o := out[i*C : (i+1)*C]
			w, b := weight[:C], bias[:C]
			for c, v := range x {
				o[c] = float32((float64(v)-mean)*rstd)*w[c] + b[c]
			}
		}
	})
}
