package cpu

import "math"

// ropeForward rotates, in place, every query head and key head of each
// qkv row (BT, (NH+2·NKV)·HS) by the row's position: the rotary position
// embedding in its neox/half-split form (transformers' rotate_half), where
// the pair (x[j], x[j+HS/2]) turns by the angle pos·θ^(-2j/HS):
//
//	x[j]      ← x[j]·cos − x[j+HS/2]·sin
//	x[j+HS/2] ← x[j+HS/2]·cos + x[j]·sin
//
// The inverse frequencies and the angle are rounded to float32 as
// transformers computes them in an fp32 model, so positions far from zero
// turn by the same angles as HF's; cos and sin are taken in float64.
func ropeForward(qkv []float32, positions []int32, theta float64, BT, NH, NKV, HS int, p *pool) {
	half := HS / 2
	rowWidth := (NH + 2*NKV) * HS
	invFreq := make([]float32, half)
	for j := range invFreq {
		invFreq[j] = float32(1 / math.Pow(theta, float64(2*j)/float64(HS)))
	}
	p.parallel(BT, 4, 1, func(_, lo, hi int) {
		cos, sin := make([]float32, half), make([]float32, half)
		for i := lo; i < hi; i++ {
			pos := float32(positions[i])
			for j, f := range invFreq {
				s, c := math.Sincos(float64(pos * f))
				cos[j], sin[j] = float32(c), float32(s)
			}
			row := qkv[i*rowWidth : (i+1)*rowWidth]
			for h := 0; h < NH+NKV; h++ { // the query heads, then the key heads
				x := row[h*HS : (h+1)*HS]
				x1, x2 := x[:half], x[half:2*half]
				for j := range x1 {
					a, b := x1[j], x2[j]
					x1[j] = a*cos[j] - b*sin[j]
					x2[j] = b*cos[j] + a*sin[j]
				}
			}
		}
	})
}
