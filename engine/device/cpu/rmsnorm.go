package cpu

import "math"

// rmsnormForward scales each row of inp (N, C) to unit root mean square,
// then by weight (C): out (N, C) = inp / sqrt(mean(inp²) + eps) · weight, no
// mean subtraction and no bias (transformers' Qwen3RMSNorm). out may alias
// inp. The mean of squares accumulates in float64.
func rmsnormForward(out, inp, weight []float32, eps float32, N, C int, p *pool) {
	p.parallel(N, 16, 1, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			rmsnormRow(out[i*C:(i+1)*C], inp[i*C:(i+1)*C], weight[:C], eps)
		}
	})
}

// rmsnormRow is one row of rmsnormForward.
func rmsnormRow(out, x, w []float32, eps float32) {
	sum := 0.0
	for _, v := range x {
		sum += float64(v) * float64(v)
	}
	rstd := 1 / math.Sqrt(sum/float64(len(x))+float64(eps))
	for c, v := range x {
		out[c] = float32(float64(v)*rstd) * w[c]
	}
}

// qkNormForward applies, in place, RMSNorm over HS to every query head
// (weight qw (HS)) and every key head (weight kw (HS)) of each qkv row
// (BT, (NH+2·NKV)·HS); the values are left alone. This is Qwen3's q_norm
// and k_norm, taken before the rotary embedding.
func qkNormForward(qkv, qw, kw []float32, eps float32, BT, NH, NKV, HS int, p *pool) {
	rowWidth := (NH + 2*NKV) * HS
	p.parallel(BT, 4, 1, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			row := qkv[i*rowWidth : (i+1)*rowWidth]
			for h := 0; h < NH+NKV; h++ {
				w := qw
				if h >= NH {
					w = kw
				}
				x := row[h*HS : (h+1)*HS]
				rmsnormRow(x, x, w[:HS], eps)
			}
		}
	})
}
