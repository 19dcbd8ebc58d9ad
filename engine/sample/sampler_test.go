package sample

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// TestCoinValues pins the counter-based generator. The expected values come
// from the formula in Coin's doc comment evaluated in Python integers:
//
//	M = 2**64-1
//	mix = lambda z: (lambda z: z ^ (z >> 31))((lambda z: ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M)(((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M))
//	coin = lambda s, i: (mix((mix(s) + (i + 1) * 0x9E3779B97F4A7C15) & M) >> 11) / 2**53
func TestCoinValues(t *testing.T) {
	tests := []struct {
		seed  uint64
		index int
		want  float64
	}{
		{0, 0, 0.8833108082136426},
		{42, 0, 0.5961188718302076},
		{42, 1, 0.1603653875985772},
		{42, 1000, 0.8440051422667861},
		{math.MaxUint64, 7, 0.7741445495399422},
	}
	for _, tt := range tests {
		if got := Coin(tt.seed, tt.index); got != tt.want {
			t.Errorf("Coin(%d, %d) = %v, want %v", tt.seed, tt.index, got, tt.want)
		}
	}
}

func TestCoinUniform(t *testing.T) {
	const n, bins = 100000, 10
	var counts [bins]int
	for i := range n {
		u := Coin(7, i)
		if u < 0 || u >= 1 {
			t.Fatalf("Coin = %v outside [0,1)", u)
		}
		counts[int(u*bins)]++
	}
	if chi := chiSquare(counts[:], uniformProbs(bins), n); chi > 27.88 { // df 9, p = 0.001
		t.Errorf("chi-square %.1f over %v", chi, counts)
	}
}

func uniformProbs(n int) []float64 {
	p := make([]float64, n)
	for i := range p {
		p[i] = 1 / float64(n)
	}
	return p
}

func chiSquare(counts []int, probs []float64, n int) float64 {
	chi := 0.0
	for i, c := range counts {
		e := probs[i] * float64(n)
		if e == 0 {
			if c != 0 {
				return math.Inf(1)
			}
			continue
		}
		chi += (float64(c) - e) * (float64(c) - e) / e
	}
	return chi
}

func TestGreedy(t *testing.T) {
	nan := float32(math.NaN())
	tests := []struct {
		name   string
		logits []float32
		p      Params
		banned int32
		want   int32
	}{
		{"max", []float32{0, 3, 1, 2}, Params{}, -1, 1},
		{"tie goes to lowest id", []float32{0, 3, 3, 2}, Params{}, -1, 1},
		{"banned max", []float32{0, 3, 3, 2}, Params{}, 1, 2},
		{"NaN is never max", []float32{nan, 1, nan}, Params{}, -1, 1},
		{"all -inf", []float32{float32(math.Inf(-1)), float32(math.Inf(-1))}, Params{}, 0, 1},
		{"top_k 1 is greedy", []float32{0, 1, 5, 2}, Params{Temperature: 1, TopK: 1, TopP: 1}, -1, 2},
		{"banned out of range is ignored", []float32{0, 1}, Params{}, 9, 1},
		{"single token cannot be banned", []float32{0}, Params{}, 0, 0},
	}
	s := NewSampler(4)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := s.Sample(tt.logits, tt.p, 0, tt.banned); got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}

// softmaxRef is an independent float64 softmax at temperature temp over ids
// not in drop.
func softmaxRef(logits []float32, temp float64, keep func(int) bool) []float64 {
	p := make([]float64, len(logits))
	m := math.Inf(-1)
	for i, x := range logits {
		if keep(i) {
			m = math.Max(m, float64(x))
		}
	}
	z := 0.0
	for i, x := range logits {
		if keep(i) {
			p[i] = math.Exp((float64(x) - m) / temp)
			z += p[i]
		}
	}
	for i := range p {
		p[i] /= z
	}
	return p
}

// TestSupport checks which tokens can come out, over 4000 draws.
func TestSupport(t *testing.T) {
	// Probabilities at T=1: 0.5, 0.3, 0.15, 0.05 (as logits of their logs),
	// then ids 4..7 far below.
	logits := []float32{float32(math.Log(0.5)), float32(math.Log(0.3)), float32(math.Log(0.15)), float32(math.Log(0.05)), -30, -30, -30, -30}
	tests := []struct {
		name   string
		p      Params
		banned int32
		want   []int32
	}{
		{"top_k 2", Params{Temperature: 1, TopK: 2, TopP: 1}, -1, []int32{0, 1}},
		{"top_k 3 with banned", Params{Temperature: 1, TopK: 3, TopP: 1}, 1, []int32{0, 2, 3}},
		{"top_p 0.8 keeps 2", Params{Temperature: 1, TopP: 0.79}, -1, []int32{0, 1}},
		{"top_p 0.81 keeps 3", Params{Temperature: 1, TopP: 0.81}, -1, []int32{0, 1, 2}},
		{"top_p tiny keeps 1", Params{Temperature: 1, TopP: 1e-6}, -1, []int32{0}},
		// After top_k 2 the kept probabilities are 0.625 and 0.375.
		{"top_k then top_p renormalises", Params{Temperature: 1, TopK: 2, TopP: 0.63}, -1, []int32{0, 1}},
		{"top_k then top_p keeps 1", Params{Temperature: 1, TopK: 2, TopP: 0.62}, -1, []int32{0}},
		{"top_p after temperature", Params{Temperature: 0.1, TopP: 0.99}, -1, []int32{0}},
	}
	s := NewSampler(len(logits))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen := map[int32]bool{}
			for i := range 4000 {
				tt.p.Seed = 99
				seen[s.Sample(logits, tt.p, i, tt.banned)] = true
			}
			var got []int32
			for id := range seen {
				got = append(got, id)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("support %v, want %v", got, tt.want)
			}
		})
	}
}

// TestDistribution compares draw frequencies with an independent float64
// softmax (chi-square, p = 0.001 critical values; fixed seeds, so the test
// is deterministic).
func TestDistribution(t *testing.T) {
	logits := []float32{1.2, -0.3, 0.5, 2.0, 0.0, -1.0, 0.8, 1.9, -2.5, 0.1}
	tests := []struct {
		name string
		p    Params
		keep func(int) bool
		crit float64 // chi-square critical value for (kept-1) dof
	}{
		{"temperature 1", Params{Temperature: 1, TopP: 1}, func(int) bool { return true }, 27.88},
		{"temperature 0.7", Params{Temperature: 0.7, TopP: 1}, func(int) bool { return true }, 27.88},
		{"temperature 1.5, top_k 4", Params{Temperature: 1.5, TopK: 4, TopP: 1},
			func(i int) bool { return i == 3 || i == 7 || i == 0 || i == 6 }, 16.27},
	}
	const n = 40000
	s := NewSampler(len(logits))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			counts := make([]int, len(logits))
			for i := range n {
				tt.p.Seed = 12345
				counts[s.Sample(logits, tt.p, i, -1)]++
			}
			probs := softmaxRef(logits, float64(tt.p.Temperature), tt.keep)
			if chi := chiSquare(counts, probs, n); chi > tt.crit {
				t.Errorf("chi-square %.1f > %.2f: counts %v, probs %.4f", chi, tt.crit, counts, probs)
			}
		})
	}
}

// TestTopPMatchesSort checks the quickselect cut against a full sort on
// random weights with many ties.
func TestTopPMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	s := NewSampler(300)
	for trial := range 2000 {
		n := 1 + rng.IntN(300)
		s.ids = s.ids[:0]
		s.weights = s.weights[:n]
		for i := range n {
			s.weights[i] = float32(rng.IntN(8)) / 4 // ties on purpose
		}
		w := slices.Clone(s.weights)
		topP := rng.Float64()
		z := 0.0
		for _, x := range w {
			z += float64(x)
		}
		s.keepTopP(topP * z)

		// Reference: sort by (w desc, id asc), keep the shortest prefix.
		order := make([]int, n)
		for i := range order {
			order[i] = i
		}
		sort.Slice(order, func(a, b int) bool {
			if w[order[a]] != w[order[b]] {
				return w[order[a]] > w[order[b]]
			}
			return order[a] < order[b]
		})
		want := make([]bool, n)
		sum := 0.0
		for _, i := range order {
			want[i] = true
			sum += float64(w[i])
			if sum >= topP*z {
				break
			}
		}
		for i := range n {
			wantW := float32(0)
			if want[i] {
				wantW = w[i]
			}
			if s.weights[i] != wantW {
				t.Fatalf("trial %d (n=%d top_p=%.3f): id %d weight %g left as %g, want %g", trial, n, topP, i, w[i], s.weights[i], wantW)
			}
		}
	}
}

func TestReproducible(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	logits := make([]float32, 50257)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64())
	}
	orig := slices.Clone(logits)
	p := Params{Temperature: 0.8, TopK: 0, TopP: 0.9, Seed: 77}
	a, b := NewSampler(len(logits)), NewSampler(len(logits))
	for i := range 20 {
		x := a.Sample(logits, p, i, 5)
		// An unrelated draw in between must not change the next one.
		b.Sample(logits, Params{Temperature: 1, TopK: 50, TopP: 1, Seed: 1}, 3, -1)
		if y := b.Sample(logits, p, i, 5); x != y {
			t.Fatalf("index %d: %d then %d", i, x, y)
		}
	}
	if !slices.Equal(logits, orig) {
		t.Error("Sample modified the logits")
	}
}

func TestSampleAllocatesNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	logits := make([]float32, 50257)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64())
	}
	s := NewSampler(len(logits))
	for _, p := range []Params{{}, {Temperature: 0.7, TopK: 50, TopP: 0.9}, {Temperature: 1, TopP: 0.9}, {Temperature: 1, TopP: 1}} {
		if n := testing.AllocsPerRun(5, func() { s.Sample(logits, p, 3, 50256) }); n != 0 {
			t.Errorf("%+v: %v allocations per Sample", p, n)
		}
	}
}

func TestLogProb(t *testing.T) {
	logits := []float32{1, 2, 3, 0.5}
	probs := softmaxRef(logits, 1, func(int) bool { return true })
	for i := range logits {
		if got, want := LogProb(logits, int32(i)), math.Log(probs[i]); math.Abs(float64(got)-want) > 1e-6 {
			t.Errorf("LogProb(%d) = %v, want %v", i, got, want)
		}
	}
}

func BenchmarkSample(b *testing.B) {
	rng := rand.New(rand.NewPCG(9, 10))
	logits := make([]float32, 50257)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 0.2)
	}
	s := NewSampler(len(logits))
	for _, bc := range []struct {
		name string
		p    Params
	}{
		{"greedy", Params{}},
		{"t0.7_k50_p0.9", Params{Temperature: 0.7, TopK: 50, TopP: 0.9}},
		{"t1_p0.9", Params{Temperature: 1, TopP: 0.9}},
		{"t1", Params{Temperature: 1, TopP: 1}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				s.Sample(logits, bc.p, i, -1)
			}
		})
	}
}

// TestTopKMatchesSort checks the heap selection against a full sort on
// random logits with many ties, a banned id and an occasional NaN.
func TestTopKMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	s := NewSampler(200)
	for trial := range 2000 {
		n := 2 + rng.IntN(200)
		logits := make([]float32, n)
		for i := range logits {
			logits[i] = float32(rng.IntN(6))
			if rng.IntN(50) == 0 {
				logits[i] = float32(math.NaN())
			}
		}
		banned := int32(rng.IntN(n+5)) - 3 // sometimes -1..-3 (none) or >= n (ignored)
		if banned >= int32(n) || banned < 0 {
			banned = -1
		}
		k := 1 + rng.IntN(n)
		s.collectCandidates(logits, k, banned)

		// Reference: ids by (logit desc with NaN last, id asc), banned removed.
		var order []int32
		for i := range n {
			if int32(i) != banned {
				order = append(order, int32(i))
			}
		}
		key := func(id int32) float64 {
			if x := logits[id]; x == x {
				return float64(x)
			}
			return math.Inf(-1)
		}
		sort.SliceStable(order, func(a, b int) bool { return key(order[a]) > key(order[b]) })
		var want []int32
		if k < len(order) {
			want = slices.Clone(order[:k])
			slices.Sort(want)
		}
		got := slices.Clone(s.ids)
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d (n=%d k=%d banned=%d): candidates %v, want %v (logits %v)", trial, n, k, banned, got, want, logits)
		}
	}
}
