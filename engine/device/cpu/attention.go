package cpu

import "math"

// attentionForward is causal grouped-query attention over the paged cache,
// the only op that mixes information across positions. Token i (of sequence
// s at position p) reads its query heads from its qkv row (BT,
// (NH+2·NKV)·HS: q, then k, then v) and the keys and values of positions
// 0..p of s from layer l's cache (kvAppendForward has already stored this
// step's own), so prefill chunks, cached prefixes and decode tokens are all
// the same case. Query head h reads KV head h/(NH/NKV); with NKV = NH it is
// multi-head attention (GPT-2). out (BT, NH·HS): the heads' outputs side by
// side. scores holds one (maxT) buffer per pool worker.
func attentionForward(out, qkv []float32, kv *kvCache, l int, st *stepLayout, scores [][]float32, BT, NH, NKV, HS int, p *pool) {
	scale := float32(1 / math.Sqrt(float64(HS)))
	kc, vc := kv.k[l], kv.v[l]
	rowWidth, outWidth, kvWidth := (NH+2*NKV)*HS, NH*HS, NKV*HS
	group := NH / NKV // query heads per KV head
	p.parallel(BT, 1, 1, func(worker, lo, hi int) {
		for i := lo; i < hi; i++ {
			table := st.blockTables[st.seqIndex[i]]
			T := int(st.positions[i]) + 1 // positions this token sees
			att := scores[worker][:T]
			for h := 0; h < NH; h++ {
				q := qkv[i*rowWidth+h*HS : i*rowWidth+(h+1)*HS]
				kvOff := (h / group) * HS
				// Pass 1: scaled dot products and their maximum.
				maxv := float32(math.Inf(-1))
				for t := 0; t < T; t++ {
					s := kv.slot(table, t)
					k := kc[s*kvWidth+kvOff : s*kvWidth+kvOff+HS]
					k = k[:len(q)]
					var dot float32
					for c, qc := range q {
						dot += qc * k[c]
					}
					dot *= scale
					att[t] = dot
					maxv = max(maxv, dot)
				}
				// Pass 2: softmax numerators and their sum.
				sum := float32(0)
				for t := range att {
					e := float32(math.Exp(float64(att[t] - maxv)))
					att[t] = e
					sum += e
				}
				inv := 1 / sum
				// Pass 3: the weighted sum of values.
				o := out[i*outWidth+h*HS : i*outWidth+(h+1)*HS]
				clear(o)
				for t := range att {
					s := kv.slot(table, t)
					v := vc[s*kvWidth+kvOff : s*kvWidth+kvOff+HS]
					v = v[:len(o)]
					a := att[t] * inv
					for c := range o {
						o[c] += a * v[c]
					}
				}
			}
		}
	})
}
