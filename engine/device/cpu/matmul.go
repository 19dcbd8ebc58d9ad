package cpu

// matmulForward is the model's only heavy op: out (BT, OC) = inp (BT, C) ·
// weightᵀ + bias, with weight (OC, C) in nn.Linear layout (llm.c's, and
// model.Weights' canonical one) and bias (OC) or nil.
// The LM head is this op with weight = wte (V, C) and no bias.
//
// Output columns are split across the pool. Every out[t][o] is one
// accumulator summed over c in ascending order, whatever tile or chunk
// computes it, so a row's result never depends on what else is in the batch:
// batched and one-at-a-time forwards agree bit for bit.
func matmulForward(out, inp, weight, bias []float32, BT, C, OC int, p *pool) {
	// Chunks of at least 48 columns, aligned to the 3-column tile.
	p.parallel(OC, 48, 3, func(_, lo, hi int) {
		matmulColumns(out, inp, weight, bias, BT, C, OC, lo, hi)
	})
}

// matmulColumns computes columns [oLo, oHi) of every row. Each 3-column
// weight tile (3·C floats) is loaded once and used for all rows, which stay
// in L1 for decode-sized batches, so the weights stream from memory once per
// step. Bias is added after the dot product, as torch's addmm does.
func matmulColumns(out, inp, weight, bias []float32, BT, C, OC, oLo, oHi int) {
	o := oLo
	for ; o+3 <= oHi; o += 3 {
		matmulTile3(out, inp, weight[o*C:(o+3)*C], BT, C, OC, o)
	}
	for ; o < oHi; o++ { // the last columns when the chunk is not a multiple of 3
		for t := 0; t < BT; t++ {
			out[t*OC+o] = dot(inp[t*C:(t+1)*C], weight[o*C:(o+1)*C])
		}
	}
	if bias != nil {
		for t := 0; t < BT; t++ {
			row, b := out[t*OC+oLo:t*OC+oHi], bias[oLo:oHi]
			for i := range row {
				row[i] += b[i]
			}
		}
	}
}

// matmulTile3 is the kernel: columns o, o+1, o+2 of every row, from the
// three weight rows w (3, C), two input rows at a time (six accumulators).
// It is its own function so that its accumulators and operands have the
// float registers (15 on amd64) to themselves. Measured on the 2-core Zen 5
// dev machine at C=64, GOAMD64=v1, per core: this ~5.7 GMAC/s; the same
// 2x3 tile as a function called per row pair ~4.9; 2x4 and 4x2 tiles
// ~3.7-4.1 (they spill); 2x2 ~4.0. Every sum runs over c in ascending order
// from 0, so results do not depend on the tile that computes them.
func matmulTile3(out, inp, w []float32, BT, C, OC, o int) {
	w0, w1, w2 := w[:C], w[C:2*C], w[2*C:3*C]
	t := 0
	for ; t+2 <= BT; t += 2 {
		x0 := inp[t*C : t*C+C]
		x1 := inp[(t+1)*C : (t+1)*C+C]
		x1, w0, w1, w2 := x1[:len(x0)], w0[:len(x0)], w1[:len(x0)], w2[:len(x0)]
		var s00, s01, s02, s10, s11, s12 float32
		for c, a := range x0 {
			b := x1[c]
			v0, v1, v2 := w0[c], w1[c], w2[c]
			s00 += a * v0
			s01 += a * v1
			s02 += a * v2
			s10 += b * v0
			s11 += b * v1
			s12 += b * v2
		}
		r := out[t*OC+o : t*OC+o+3]
		r[0], r[1], r[2] = s00, s01, s02
		r = out[(t+1)*OC+o : (t+1)*OC+o+3]
		r[0], r[1], r[2] = s10, s11, s12
	}
	if t < BT {
		x0 := inp[t*C : t*C+C]
		w0, w1, w2 := w0[:len(x0)], w1[:len(x0)], w2[:len(x0)]
		var s0, s1, s2 float32
		for c, a := range x0 {
			s0 += a * w0[c]
			s1 += a * w1[c]
			s2 += a * w2[c]
		}
		r := out[t*OC+o : t*OC+o+3]
		r[0], r[1], r[2] = s0, s1, s2
	}
}

// dot is one dot product, summed the same way.
func dot(x, w []float32) (s float32) {
	w = w[:len(x)]
	for c, a := range x {
		s += a * w[c]
	}
	return
}

// matmulForwardNaive is the plain triple loop the tiled kernel is tested
// against (same summation order, so results must match exactly).
func matmulForwardNaive(out, inp, weight, bias []float32, BT, C, OC int) {
	for t := 0; t < BT; t++ {
		for o := 0; o < OC; o++ {
			var s float32
			for c := 0; c < C; c++ {
				s += inp[t*C+c] * weight[o*C+c]
			}
			if bias != nil {
				s += bias[o]
			}
			out[t*OC+o] = s
		}
	}
}
