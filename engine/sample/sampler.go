package sample

import (
	"math"
	"slices"
)

// Sampler is the CPU reference sampler. It keeps scratch buffers sized to the
// vocabulary, so Sample allocates nothing after the first call; one Sampler
// per goroutine.
//
// The exact rule, which every device mirrors (V = len(logits), l = logits):
//
//  1. Greedy (Params.IsGreedy: temperature 0 or top_k 1): the id with the
//     largest logit, ties to the lowest id, never the banned id. NaN counts
//     as -inf. No coin is used.
//  2. Candidates: all ids except the banned one; with 0 < top_k < their
//     number, only the top_k largest logits (ties to the lower id). Candidates
//     are then taken in ascending id order.
//  3. Weights: m = max candidate logit (fp32); w_t = float32(exp(float64(l_t
//     - m) / T)) with T = temperature (a NaN weight counts as 0);
//     Z = Σ w_t in float64.
//  4. Top-p (only if top_p < 1): rank candidates by (w desc, id asc) and keep
//     the shortest prefix whose weight sum is >= top_p·Z; at least one token.
//     (Sums are float64; which of two orders of summation decides a cut that
//     ties within rounding is unspecified.)
//  5. Draw: u = Coin(seed, index); S = Σ of kept weights (float64, ascending
//     id); the token is the lowest kept id t whose running sum in ascending id
//     order (Σ_{kept s <= t} w_s) is > u·S. If rounding leaves none, the
//     highest kept id with w > 0.
//
// If no candidate has a positive weight (every logit -inf or NaN), Sample
// falls back to rule 1.
type Sampler struct {
	ids     []int32   // top-k candidate ids, ascending; empty = all ids
	weights []float32 // w of each candidate (0 for banned and for top-p drops)
	keys    []uint64  // scratch: top-p ranking keys
	heap    []int32   // scratch: top-k min-heap of ids (root = worst kept)
}

// NewSampler returns a sampler with scratch for a vocabulary of vocabSize.
func NewSampler(vocabSize int) *Sampler {
	return &Sampler{
		ids:     make([]int32, 0, vocabSize),
		weights: make([]float32, 0, vocabSize),
		keys:    make([]uint64, 0, vocabSize),
		heap:    make([]int32, 0, vocabSize),
	}
}

// Sample draws the index-th generated token of a request from its logits (V
// values; left unchanged). banned is never returned (-1 = none); it is
// ignored if it is the only token.
func (s *Sampler) Sample(logits []float32, p Params, index int, banned int32) int32 {
	if banned >= 0 && (int(banned) >= len(logits) || len(logits) == 1) {
		banned = -1
	}
	if p.IsGreedy() {
		return argmax(logits, banned)
	}
	s.collectCandidates(logits, p.TopK, banned)
	m := float32(math.Inf(-1))
	for i := range s.weights {
		if id := s.id(i); logits[id] > m && id != banned {
			m = logits[id]
		}
	}
	if math.IsInf(float64(m), -1) {
		return argmax(logits, banned)
	}
	temp := float64(p.Temperature)
	z := 0.0
	for i := range s.weights {
		id := s.id(i)
		w := float32(math.Exp(float64(logits[id]-m) / temp))
		if w != w || id == banned {
			w = 0
		}
		s.weights[i] = w
		z += float64(w)
	}
	if !(z > 0) || math.IsInf(z, 1) {
		return argmax(logits, banned)
	}
	if p.TopP < 1 {
		s.keepTopP(float64(p.TopP) * z)
	}
	return s.draw(Coin(p.Seed, index))
}

// id maps a candidate position to its token id: with top-k off the
// candidates are all ids and s.ids is empty.
func (s *Sampler) id(i int) int32 {
	if len(s.ids) == 0 {
		return int32(i)
	}
	return s.ids[i]
}

// argmax is rule 1: largest logit, ties to the lowest id, skipping banned.
// The scan is split around banned so its loop has a single comparison.
func argmax(logits []float32, banned int32) int32 {
	best, bestID := float32(math.Inf(-1)), int32(-1)
	scan := func(lo, hi int) {
		for i, x := range logits[lo:hi] {
			if x > best { // false for NaN
				best, bestID = x, int32(lo+i)
			}
		}
	}
	if banned < 0 {
		scan(0, len(logits))
	} else {
		scan(0, int(banned))
		scan(int(banned)+1, len(logits))
	}
	if bestID < 0 { // every logit -inf or NaN: the lowest allowed id
		bestID = 0
		if banned == 0 {
			bestID = 1
		}
	}
	return bestID
}

// collectCandidates applies rule 2. With top-k off, candidates are all ids
// (s.ids empty, s.weights indexed by id; banned gets weight 0); otherwise
// s.ids holds the top_k ids ascending and s.weights one weight per id.
func (s *Sampler) collectCandidates(logits []float32, topK int, banned int32) {
	n := len(logits)
	if banned >= 0 {
		n--
	}
	s.ids = s.ids[:0]
	if topK <= 0 || topK >= n {
		s.weights = slices.Grow(s.weights[:0], len(logits))[:len(logits)]
		return
	}
	// A min-heap of the best topK seen so far, root = the worst of them.
	// Scanning ids upwards, an equal logit never displaces a lower id.
	h := s.heap[:0]
	worse := func(a, b int32) bool { // a ranks below b
		la, lb := finite(logits[a]), finite(logits[b])
		return la < lb || (la == lb && a > b)
	}
	thr := float32(0) // the root's logit once the heap is full
	for i, x := range logits {
		id := int32(i)
		if len(h) == topK {
			// Fast rejection: scanning upwards, only a strictly larger
			// logit can displace the root (false for NaN, as it should be).
			if !(x > thr) || id == banned {
				continue
			}
			h[0] = id
			siftDown(h, 0, worse)
			thr = finite(logits[h[0]])
			continue
		}
		if id == banned {
			continue
		}
		h = append(h, id)
		siftUp(h, len(h)-1, worse)
		if len(h) == topK {
			thr = finite(logits[h[0]])
		}
	}
	s.heap = h
	s.ids = append(s.ids, h...)
	slices.Sort(s.ids)
	s.weights = slices.Grow(s.weights[:0], len(s.ids))[:len(s.ids)]
}

// finite maps NaN to -inf so that comparisons order it last.
func finite(x float32) float32 {
	if x != x {
		return float32(math.Inf(-1))
	}
	return x
}

func siftUp(h []int32, i int, less func(a, b int32) bool) {
	for i > 0 {
		parent := (i - 1) / 2
		if !less(h[i], h[parent]) {
			return
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

func siftDown(h []int32, i int, less func(a, b int32) bool) {
	for {
		small, l, r := i, 2*i+1, 2*i+2
		if l < len(h) && less(h[l], h[small]) {
			small = l
		}
		if r < len(h) && less(h[r], h[small]) {
			small = r
		}
		if small == i {
			return
		}
		h[i], h[small] = h[small], h[i]
		i = small
	}
}

// rankKey packs (w, position) so that a larger key ranks higher in rule 4:
// non-negative float32 bits order like the floats, and ^pos puts the lower
// position (= lower id) first among equal weights.
func rankKey(w float32, pos int) uint64 {
	return uint64(math.Float32bits(w))<<32 | uint64(^uint32(pos))
}

func keyWeight(k uint64) float64 { return float64(math.Float32frombits(uint32(k >> 32))) }
func keyPos(k uint64) int        { return int(^uint32(k)) }

// keepTopP applies rule 4: it finds the shortest ranked prefix with weight >=
// need by quickselect over packed keys (expected O(n), no full sort) and
// zeroes the weights of the rest.
func (s *Sampler) keepTopP(need float64) {
	keys := slices.Grow(s.keys[:0], len(s.weights))[:len(s.weights)]
	s.keys = keys
	for i, w := range s.weights {
		keys[i] = rankKey(w, i)
	}
	kept := 1 // need <= 0: only the best token
	if need <= 0 {
		best := 0
		for i, k := range keys {
			if k > keys[best] {
				best = i
			}
		}
		keys[0], keys[best] = keys[best], keys[0]
	} else {
		// Invariant: keys[:lo] rank above keys[lo:hi], which rank above
		// keys[hi:]; need is what keys[lo:] must still supply.
		lo, hi := 0, len(keys)
		kept = -1
		for lo < hi && kept < 0 {
			p := partition(keys, lo, hi)
			above := 0.0
			for _, k := range keys[lo:p] {
				above += keyWeight(k)
			}
			switch {
			case above >= need:
				hi = p
			case above+keyWeight(keys[p]) >= need:
				kept = p + 1
			default:
				need -= above + keyWeight(keys[p])
				lo = p + 1
			}
		}
		if kept < 0 {
			kept = lo // rounding: the whole remaining mass fell short
		}
	}
	for _, k := range keys[kept:] {
		s.weights[keyPos(k)] = 0
	}
}

// partition orders keys[lo:hi] around a median-of-three pivot: larger keys,
// the pivot at the returned index, then smaller keys (keys are distinct).
func partition(keys []uint64, lo, hi int) int {
	mid, last := lo+(hi-lo)/2, hi-1
	// The median of keys[lo], keys[mid], keys[last] moves to keys[last].
	if keys[mid] > keys[lo] {
		keys[mid], keys[lo] = keys[lo], keys[mid]
	}
	if keys[last] > keys[lo] {
		keys[last], keys[lo] = keys[lo], keys[last]
	}
	if keys[mid] > keys[last] {
		keys[mid], keys[last] = keys[last], keys[mid]
	}
	pivot := keys[last]
	store := lo
	for i := lo; i < last; i++ {
		if k := keys[i]; k > pivot {
			keys[i], keys[store] = keys[store], k
			store++
		}
	}
	keys[store], keys[last] = keys[last], keys[store]
	return store
}

// draw applies rule 5 over s.weights.
func (s *Sampler) draw(u float64) int32 {
	total := 0.0
	for _, w := range s.weights {
		total += float64(w)
	}
	target := u * total
	acc, last := 0.0, int32(-1)
	for i, w := range s.weights {
		if w <= 0 {
			continue
		}
		acc += float64(w)
		last = s.id(i)
		if acc > target {
			return last
		}
	}
	return last
}

// LogProb is the model's log-probability of token under logits (log-softmax
// at temperature 1, before top-k/top-p or banning): what an API returns as
// the token's logprob. It costs one exp per vocabulary entry, so devices call
// it only when a request asks for logprobs.
func LogProb(logits []float32, token int32) float32 {
	m := math.Inf(-1)
	for _, x := range logits {
		m = math.Max(m, float64(finite(x)))
	}
	sum := 0.0
	for _, x := range logits {
		sum += math.Exp(float64(finite(x)) - m)
	}
	return float32(float64(logits[token]) - m - math.Log(sum))
}
