package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestRMSNormMatchesNaive: rmsnormForward against a float64 loop, on rows
// with an offset and a scale (which RMSNorm, unlike LayerNorm, keeps).
func TestRMSNormMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 21))
	const N, C, eps = 37, 48, 1e-6
	inp, w := randomSlice(rng, N*C), randomSlice(rng, C)
	for i := range inp {
		inp[i] = inp[i]*3 + 1
	}
	p := newPool(2)
	defer p.close()
	out := make([]float32, N*C)
	rmsnormForward(out, inp, w, eps, N, C, p)
	for i := range N {
		x := inp[i*C : (i+1)*C]
		ms := 0.0
		for _, v := range x {
			ms += float64(v) * float64(v) / C
		}
		for c, v := range x {
			want := float64(v) / math.Sqrt(ms+eps) * float64(w[c])
			if got := float64(out[i*C+c]); math.Abs(got-want) > 1e-5*math.Max(1, math.Abs(want)) {
				t.Fatalf("rmsnorm[%d][%d] = %g, want %g", i, c, got, want)
			}
		}
	}
}

// TestQKNorm: every q and k head of a qkv row is RMS-normed with its own
// weight, the values are untouched.
func TestQKNorm(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 22))
	const BT, NH, NKV, HS, eps = 5, 4, 2, 8, 1e-6
	W := (NH + 2*NKV) * HS
	qkv, qw, kw := randomSlice(rng, BT*W), randomSlice(rng, HS), randomSlice(rng, HS)
	orig := append([]float32(nil), qkv...)
	p := newPool(2)
	defer p.close()
	qkNormForward(qkv, qw, kw, eps, BT, NH, NKV, HS, p)
	for i := range BT {
		for h := range NH + 2*NKV {
			want := make([]float32, HS)
			x := orig[i*W+h*HS : i*W+(h+1)*HS]
			switch {
			case h < NH:
				rmsnormForward(want, x, qw, eps, 1, HS, p)
			case h < NH+NKV:
				rmsnormForward(want, x, kw, eps, 1, HS, p)
			default:
				copy(want, x)
			}
			for c := range HS {
				if got := qkv[i*W+h*HS+c]; got != want[c] {
					t.Fatalf("row %d head %d channel %d: %g, want %g", i, h, c, got, want[c])
				}
			}
		}
	}
}

// TestRopeIdentities: rotation leaves position 0 alone and the values
// untouched, keeps each rotated pair's length, matches the half-split
// formula on a hand-checked element, and makes q·k depend only on the
// distance between the positions (the point of rotary embeddings).
func TestRopeIdentities(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 23))
	const NH, NKV, HS, theta = 4, 2, 16, 10000.0
	W := (NH + 2*NKV) * HS
	positions := []int32{0, 3, 17, 5, 9}
	BT := len(positions)
	orig := randomSlice(rng, BT*W)
	qkv := append([]float32(nil), orig...)
	p := newPool(2)
	defer p.close()
	ropeForward(qkv, positions, theta, BT, NH, NKV, HS, p)
	half := HS / 2
	for i, pos := range positions {
		for h := range NH + 2*NKV {
			x, y := orig[i*W+h*HS:i*W+(h+1)*HS], qkv[i*W+h*HS:i*W+(h+1)*HS]
			for j := range half {
				if pos == 0 || h >= NH+NKV {
					if y[j] != x[j] || y[j+half] != x[j+half] {
						t.Fatalf("row %d (position %d) head %d pair %d changed", i, pos, h, j)
					}
					continue
				}
				n0 := math.Hypot(float64(x[j]), float64(x[j+half]))
				n1 := math.Hypot(float64(y[j]), float64(y[j+half]))
				if math.Abs(n0-n1) > 1e-5*math.Max(1, n0) {
					t.Fatalf("row %d head %d pair %d: length %g became %g", i, h, j, n0, n1)
				}
				angle := float64(pos) * math.Pow(theta, -2*float64(j)/HS)
				want := float64(x[j])*math.Cos(angle) - float64(x[j+half])*math.Sin(angle)
				if math.Abs(float64(y[j])-want) > 1e-5 {
					t.Fatalf("row %d head %d x[%d] = %g, want %g", i, h, j, y[j], want)
				}
			}
		}
	}
	// Relative positions: q at m and k at n give the same dot product as at
	// m+7 and n+7.
	q, k := randomSlice(rng, HS), randomSlice(rng, HS)
	dot := func(m, n int32) float64 {
		row := make([]float32, 2*W)
		copy(row[0:HS], q)
		copy(row[W+NH*HS:W+NH*HS+HS], k)
		ropeForward(row, []int32{m, n}, theta, 2, NH, NKV, HS, p)
		s := 0.0
		for c := range HS {
			s += float64(row[c]) * float64(row[W+NH*HS+c])
		}
		return s
	}
	for _, mn := range [][2]int32{{5, 2}, {11, 11}, {3, 9}} {
		a, b := dot(mn[0], mn[1]), dot(mn[0]+7, mn[1]+7)
		if math.Abs(a-b) > 1e-4 {
			t.Errorf("q·k at %v is %g, shifted by 7 it is %g", mn, a, b)
		}
	}
}

// TestGQAEqualsMHAWithRepeatedKV: grouped-query attention equals multi-head
// attention over the same queries with each KV head repeated for the query
// heads of its group (HF's repeat_kv), bit for bit.
func TestGQAEqualsMHAWithRepeatedKV(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 24))
	const NH, NKV, HS, B, maxT = 6, 2, 8, 4, 32
	group := NH / NKV
	tables := [][]int32{{3, 0, 6, 1, 5}, {2, 7, 4}}
	st := &stepLayout{blockTables: tables}
	for pos := range 11 { // a prefill of 11 tokens
		st.tokens, st.positions, st.seqIndex = append(st.tokens, 0), append(st.positions, int32(pos)), append(st.seqIndex, 0)
	}
	for pos := range 9 { // and another of 9
		st.tokens, st.positions, st.seqIndex = append(st.tokens, 0), append(st.positions, int32(pos)), append(st.seqIndex, 1)
	}
	BT := len(st.tokens)
	gW, mW := (NH+2*NKV)*HS, 3*NH*HS
	gqkv := randomSlice(rng, BT*gW)
	mqkv := make([]float32, BT*mW)
	for i := range BT {
		g, m := gqkv[i*gW:(i+1)*gW], mqkv[i*mW:(i+1)*mW]
		copy(m[:NH*HS], g[:NH*HS])
		for h := range NH {
			kh := h / group
			copy(m[NH*HS+h*HS:NH*HS+(h+1)*HS], g[NH*HS+kh*HS:NH*HS+(kh+1)*HS])
			copy(m[2*NH*HS+h*HS:2*NH*HS+(h+1)*HS], g[(NH+NKV)*HS+kh*HS:(NH+NKV)*HS+(kh+1)*HS])
		}
	}
	p := newPool(2)
	defer p.close()
	scores := [][]float32{make([]float32, maxT), make([]float32, maxT)}
	run := func(qkv []float32, nkv int) []float32 {
		kv, err := newKVCache(1, nkv*HS, 8, B)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]float32, BT*NH*HS)
		kvAppendForward(kv, 0, qkv, st, BT, NH, nkv, HS)
		attentionForward(out, qkv, kv, 0, st, scores, BT, NH, nkv, HS, p)
		return out
	}
	got, want := run(gqkv, NKV), run(mqkv, NH)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("out[%d] = %g, multi-head with repeated KV %g", i, got[i], want[i])
		}
	}
}

// TestSwiGLUMatchesNaive: silu(gate)·up over rows of gate|up side by side.
func TestSwiGLUMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 25))
	const N, I = 19, 40
	inp := randomSlice(rng, N*2*I)
	for i := range inp {
		inp[i] *= 4 // reach the saturated ends of the sigmoid
	}
	p := newPool(2)
	defer p.close()
	out := make([]float32, N*I)
	swigluForward(out, inp, N, I, p)
	for i := range N {
		for c := range I {
			g, u := float64(inp[i*2*I+c]), float64(inp[i*2*I+I+c])
			want := g / (1 + math.Exp(-g)) * u
			if got := float64(out[i*I+c]); math.Abs(got-want) > 1e-5*math.Max(1, math.Abs(want)) {
				t.Fatalf("swiglu[%d][%d] = %g, want %g", i, c, got, want)
			}
		}
	}
}
