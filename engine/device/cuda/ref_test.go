package cuda

import (
	"math"

	"github.com/roseinfer/roseinfer/engine/model"
	"github.com/roseinfer/roseinfer/engine/model/gpt2"
)

// refSeq is one sequence of the reference model: its dense per-layer K/V.
// The reference is a plain fp32 GPT-2 forward (float64 sums), one token at a
// time, written from the GPT-2 definition and independent of the device code:
// the CUDA device is checked against it.
type refSeq struct {
	k, v [][]float32 // per layer: (T, C)
}

func newRefSeq(L int) *refSeq { return &refSeq{k: make([][]float32, L), v: make([][]float32, L)} }

// refForward feeds tokens at positions start.. and returns the logits of the
// last one (V).
func refForward(w *model.Weights, s *refSeq, tokens []int32, start int) []float32 {
	c := w.Config
	L, C, NH, V := c.NumLayers, c.Channels, c.NumHeads, c.VocabSize
	HD := C / NH
	x := make([]float32, C)
	h := make([]float32, C)
	qkv := make([]float32, 3*C)
	att := make([]float32, C)
	fc := make([]float32, 4*C)
	tensor := func(name string) []float32 {
		t, err := w.Tensor(name)
		if err != nil {
			panic(err)
		}
		return t.Data
	}
	wte, wpe := tensor(gpt2.WTE), tensor(gpt2.WPE)
	layer := func(name string, l int) []float32 { t := tensor(name); n := len(t) / L; return t[l*n : (l+1)*n] }
	for i, tok := range tokens {
		pos := start + i
		for j := 0; j < C; j++ {
			x[j] = wte[int(tok)*C+j] + wpe[pos*C+j]
		}
		for l := 0; l < L; l++ {
			refLayerNorm(h, x, layer(gpt2.LN1W, l), layer(gpt2.LN1B, l), c.LayerNormEpsilon)
			refMatmul(qkv, h, layer(gpt2.QKVW, l), layer(gpt2.QKVB, l), C, 3*C)
			s.k[l] = append(s.k[l], qkv[C:2*C]...)
			s.v[l] = append(s.v[l], qkv[2*C:3*C]...)
			T := pos + 1
			for hd := 0; hd < NH; hd++ {
				q := qkv[hd*HD : (hd+1)*HD]
				scores := make([]float64, T)
				mx := math.Inf(-1)
				for t := 0; t < T; t++ {
					dot := 0.0
					for d := 0; d < HD; d++ {
						dot += float64(q[d]) * float64(s.k[l][t*C+hd*HD+d])
					}
					scores[t] = dot / math.Sqrt(float64(HD))
					mx = math.Max(mx, scores[t])
				}
				sum := 0.0
				for t := range scores {
					scores[t] = math.Exp(scores[t] - mx)
					sum += scores[t]
				}
				for d := 0; d < HD; d++ {
					o := 0.0
					for t := 0; t < T; t++ {
						o += scores[t] * float64(s.v[l][t*C+hd*HD+d])
					}
					att[hd*HD+d] = float32(o / sum)
				}
			}
			refMatmul(h, att, layer(gpt2.AttProjW, l), layer(gpt2.AttProjB, l), C, C)
			for j := range x {
				x[j] += h[j]
			}
			refLayerNorm(h, x, layer(gpt2.LN2W, l), layer(gpt2.LN2B, l), c.LayerNormEpsilon)
			refMatmul(fc, h, layer(gpt2.FCW, l), layer(gpt2.FCB, l), C, 4*C)
			for j, v := range fc {
				fc[j] = float32(0.5 * float64(v) * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(float64(v)+0.044715*math.Pow(float64(v), 3)))))
			}
			refMatmul(h, fc, layer(gpt2.FCProjW, l), layer(gpt2.FCProjB, l), 4*C, C)
			for j := range x {
				x[j] += h[j]
			}
		}
	}
	refLayerNorm(h, x, tensor(gpt2.LNFW), tensor(gpt2.LNFB), c.LayerNormEpsilon)
	logits := make([]float32, V)
	for v := 0; v < V; v++ {
		dot := 0.0
		for j := 0; j < C; j++ {
			dot += float64(h[j]) * float64(wte[v*C+j])
		}
		logits[v] = float32(dot)
	}
	return logits
}

func refLayerNorm(out, x, w, b []float32, eps float32) {
	mean, varsum := 0.0, 0.0
	for _, v := range x {
		mean += float64(v)
	}
	mean /= float64(len(x))
	for _, v := range x {
		varsum += (float64(v) - mean) * (float64(v) - mean)
	}
	rstd := 1 / math.Sqrt(varsum/float64(len(x))+float64(eps))
	for i, v := range x {
		out[i] = float32((float64(v)-mean)*rstd)*w[i] + b[i]
	}
}

// refMatmul: out(n) = W(n, k) · in(k) + b, W in nn.Linear's (out, in)
// layout, model.Weights' canonical one.
func refMatmul(out, in, W, b []float32, k, n int) {
	for j := range out[:n] {
		acc := 0.0
		for i, wv := range W[j*k : (j+1)*k] {
			acc += float64(in[i]) * float64(wv)
		}
		out[j] = float32(acc + float64(b[j]))
	}
}

// relErr is ||a - b|| / ||b||.
func relErr(a, b []float32) float64 {
	num, den := 0.0, 0.0
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		num += d * d
		den += float64(b[i]) * float64(b[i])
	}
	if den == 0 {
		return math.Sqrt(num)
	}
	return math.Sqrt(num / den)
}

func argmaxF32(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}
