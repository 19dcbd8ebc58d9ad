package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

func randomSlice(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(rng.NormFloat64())
	}
	return s
}

// TestMatmulMatchesNaive: the tiled, parallel kernel equals the triple loop
// bit for bit, for shapes that hit every remainder path.
func TestMatmulMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, workers := range []int{1, 2, 3} {
		p := newPool(workers)
		defer p.close()
		for range 60 {
			BT, C, OC := 1+rng.IntN(9), 1+rng.IntN(70), 1+rng.IntN(400)
			inp, weight := randomSlice(rng, BT*C), randomSlice(rng, OC*C)
			bias := randomSlice(rng, OC)
			if rng.IntN(2) == 0 {
				bias = nil
			}
			got, want := make([]float32, BT*OC), make([]float32, BT*OC)
			matmulForward(got, inp, weight, bias, BT, C, OC, p)
			matmulForwardNaive(want, inp, weight, bias, BT, C, OC)
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("workers=%d BT=%d C=%d OC=%d: out[%d] = %g, naive %g", workers, BT, C, OC, i, got[i], want[i])
				}
			}
		}
	}
}

// TestAttentionMatchesDense compares the paged attention with a dense
// float64 computation over the same keys and values, for two sequences with
// scrambled block tables and a mix of prefill and decode tokens.
func TestAttentionMatchesDense(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	const C, NH, B, maxT = 32, 4, 4, 40
	HS := C / NH
	kv, err := newKVCache(1, C, 32, B)
	if err != nil {
		t.Fatal(err)
	}
	// Sequence 0: 13 tokens at positions 0..12 (a prefill); sequence 1:
	// one token at position 21 (a decode), its earlier K/V already cached.
	tables := [][]int32{{7, 2, 30, 11}, {5, 19, 0, 3, 26, 8}}
	st := &stepLayout{blockTables: tables}
	for pos := range 13 {
		st.tokens, st.positions, st.seqIndex = append(st.tokens, 0), append(st.positions, int32(pos)), append(st.seqIndex, 0)
	}
	st.tokens, st.positions, st.seqIndex = append(st.tokens, 0), append(st.positions, 21), append(st.seqIndex, 1)
	BT := len(st.tokens)
	// Earlier positions of sequence 1 are in the cache from "earlier steps".
	dense := [2][][2][]float32{make([][2][]float32, 13), make([][2][]float32, 22)}
	for pos := range 21 {
		k, v := randomSlice(rng, C), randomSlice(rng, C)
		s := kv.slot(tables[1], pos)
		copy(kv.k[0][s*C:], k)
		copy(kv.v[0][s*C:], v)
		dense[1][pos] = [2][]float32{k, v}
	}
	qkv := randomSlice(rng, BT*3*C)
	for i := range BT {
		row := qkv[i*3*C : (i+1)*3*C]
		dense[st.seqIndex[i]][st.positions[i]] = [2][]float32{row[C : 2*C], row[2*C:]}
	}
	kvAppendForward(kv, 0, qkv, st, BT, NH, NH, HS)
	p := newPool(2)
	defer p.close()
	scores := [][]float32{make([]float32, maxT), make([]float32, maxT)}
	out := make([]float32, BT*C)
	attentionForward(out, qkv, kv, 0, st, scores, BT, NH, NH, HS, p)

	for i := range BT {
		seq, pos := st.seqIndex[i], int(st.positions[i])
		for h := range NH {
			q := qkv[i*3*C+h*HS : i*3*C+(h+1)*HS]
			att := make([]float64, pos+1)
			maxv := math.Inf(-1)
			for t := range att {
				for c := range HS {
					att[t] += float64(q[c]) * float64(dense[seq][t][0][h*HS+c])
				}
				att[t] /= math.Sqrt(float64(HS))
				maxv = math.Max(maxv, att[t])
			}
			sum := 0.0
			for t := range att {
				att[t] = math.Exp(att[t] - maxv)
				sum += att[t]
			}
			for c := range HS {
				want := 0.0
				for t := range att {
					want += att[t] / sum * float64(dense[seq][t][1][h*HS+c])
				}
				if got := float64(out[i*C+h*HS+c]); math.Abs(got-want) > 1e-5 {
					t.Fatalf("token %d head %d channel %d: %g, dense %g", i, h, c, got, want)
				}
			}
		}
	}
}

func TestLayernormAndGelu(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	const N, C = 5, 48
	inp, w, b := randomSlice(rng, N*C), randomSlice(rng, C), randomSlice(rng, C)
	for i := range inp {
		inp[i] = inp[i]*3 + 1 // a mean and a scale to remove
	}
	p := newPool(2)
	defer p.close()
	out := make([]float32, N*C)
	layernormForward(out, inp, w, b, 1e-5, N, C, p)
	for i := range N {
		x := inp[i*C : (i+1)*C]
		mean, variance := 0.0, 0.0
		for _, v := range x {
			mean += float64(v) / C
		}
		for _, v := range x {
			variance += (float64(v) - mean) * (float64(v) - mean) / C
		}
		for c, v := range x {
			want := (float64(v)-mean)/math.Sqrt(variance+1e-5)*float64(w[c]) + float64(b[c])
			if got := float64(out[i*C+c]); math.Abs(got-want) > 1e-5 {
				t.Fatalf("layernorm[%d][%d] = %g, want %g", i, c, got, want)
			}
		}
	}
	// gelu_new at points computed with the formula in Python floats:
	// 0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³))).
	cases := []struct{ x, want float64 }{
		{0, 0}, {1, 0.8411919906082768}, {-1, -0.15880800939172324}, {3, 2.996362607918227}, {-4, -7.024594819227126e-05},
	}
	for _, c := range cases {
		got := make([]float32, 1)
		geluForward(got, []float32{float32(c.x)}, 1, p)
		if math.Abs(float64(got[0])-c.want) > 1e-6*math.Max(1, math.Abs(c.want)) {
			t.Errorf("gelu(%g) = %g, want %g", c.x, got[0], c.want)
		}
	}
}
