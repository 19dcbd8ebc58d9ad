package tokenizer

import "math"

// Byte-pair merging of one pre-tokenized piece, the way HF's BPE model does
// it: start from one symbol per byte and repeatedly apply the merge of lowest
// rank present among adjacent pairs, leftmost first, until none applies.
//
// A merge is stored packed as rank<<32 | mergedID, so comparing packed values
// compares ranks; noMerge is larger than any of them.

const noMerge = math.MaxUint64

func packMerge(rank uint32, merged int32) uint64 { return uint64(rank)<<32 | uint64(uint32(merged)) }

func pairKey(left, right int32) uint64 { return uint64(uint32(left))<<32 | uint64(uint32(right)) }

// longPieceBytes is where appendPieceIDs switches from the quadratic array
// scan (fastest for the short pieces of ordinary text) to the heap, which keeps
// a long run such as 100 KB of one letter from costing O(n^2).
const longPieceBytes = 128

// bpeScratch holds buffers reused across the pieces of one Encode call.
type bpeScratch struct {
	syms  []int32
	pairs []uint64
	nodes []bpeNode
	heap  mergeHeap
}

func (t *Tokenizer) mergeOf(left, right int32) uint64 {
	return t.merges.get(pairKey(left, right))
}

// appendPieceIDs appends the BPE ids of piece to ids.
func (t *Tokenizer) appendPieceIDs(ids []int32, piece string, sc *bpeScratch) []int32 {
	if len(piece) == 1 {
		return append(ids, t.byteID[piece[0]])
	}
	if len(piece) > longPieceBytes {
		return t.appendPieceIDsHeap(ids, piece, sc)
	}
	syms := sc.syms[:0]
	for i := 0; i < len(piece); i++ {
		syms = append(syms, t.byteID[piece[i]])
	}
	pairs := sc.pairs[:0]
	for i := 0; i+1 < len(syms); i++ {
		pairs = append(pairs, t.mergeOf(syms[i], syms[i+1]))
	}
	for len(pairs) > 0 {
		best := 0
		for i := 1; i < len(pairs); i++ {
			if pairs[i] < pairs[best] {
				best = i
			}
		}
		if pairs[best] == noMerge {
			break
		}
		// syms[best], syms[best+1] become one symbol; the pairs on either side
		// of it change, the pair it was is gone.
		syms[best] = int32(uint32(pairs[best]))
		syms = append(syms[:best+1], syms[best+2:]...)
		pairs = append(pairs[:best], pairs[best+1:]...)
		if best > 0 {
			pairs[best-1] = t.mergeOf(syms[best-1], syms[best])
		}
		if best < len(pairs) {
			pairs[best] = t.mergeOf(syms[best], syms[best+1])
		}
	}
	sc.syms, sc.pairs = syms, pairs
	return append(ids, syms...)
}

// bpeNode is a symbol in the linked list the heap path merges in place.
type bpeNode struct {
	id         int32 // -1 once merged into its left neighbour
	prev, next int32 // -1 at the ends
}

// heapEntry is a candidate merge of nodes[pos] with its right neighbour.
type heapEntry struct {
	merge uint64
	pos   int32
}

// mergeHeap is a binary min-heap ordered by (rank, position): lowest rank
// first, leftmost first among equal ranks, as in HF's BPE.
type mergeHeap []heapEntry

func (h mergeHeap) less(i, j int) bool {
	if h[i].merge != h[j].merge {
		return h[i].merge < h[j].merge
	}
	return h[i].pos < h[j].pos
}

func (h *mergeHeap) push(e heapEntry) {
	*h = append(*h, e)
	s := *h
	for i := len(s) - 1; i > 0; {
		parent := (i - 1) / 2
		if !s.less(i, parent) {
			break
		}
		s[i], s[parent] = s[parent], s[i]
		i = parent
	}
}

func (h *mergeHeap) pop() heapEntry {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		small, l, r := i, 2*i+1, 2*i+2
		if l < len(s) && s.less(l, small) {
			small = l
		}
		if r < len(s) && s.less(r, small) {
			small = r
		}
		if small == i {
			break
		}
		s[i], s[small] = s[small], s[i]
		i = small
	}
	*h = s
	return top
}

// appendPieceIDsHeap is appendPieceIDs in O(n log n) for long pieces. A heap
// entry goes stale when either of its nodes has merged since; it is then
// recognised by the pair's current merge differing from the entry's.
func (t *Tokenizer) appendPieceIDsHeap(ids []int32, piece string, sc *bpeScratch) []int32 {
	nodes := sc.nodes[:0]
	for i := 0; i < len(piece); i++ {
		nodes = append(nodes, bpeNode{id: t.byteID[piece[i]], prev: int32(i - 1), next: int32(i + 1)})
	}
	nodes[len(nodes)-1].next = -1
	h := sc.heap[:0]
	for i := 0; i+1 < len(nodes); i++ {
		if m := t.mergeOf(nodes[i].id, nodes[i+1].id); m != noMerge {
			h.push(heapEntry{merge: m, pos: int32(i)})
		}
	}
	for len(h) > 0 {
		e := h.pop()
		left := &nodes[e.pos]
		if left.id < 0 || left.next < 0 || t.mergeOf(left.id, nodes[left.next].id) != e.merge {
			continue
		}
		right := left.next
		left.id = int32(uint32(e.merge))
		left.next = nodes[right].next
		nodes[right].id = -1
		if left.next >= 0 {
			nodes[left.next].prev = e.pos
			if m := t.mergeOf(left.id, nodes[left.next].id); m != noMerge {
				h.push(heapEntry{merge: m, pos: e.pos})
			}
		}
		if left.prev >= 0 {
			if m := t.mergeOf(nodes[left.prev].id, left.id); m != noMerge {
				h.push(heapEntry{merge: m, pos: left.prev})
			}
		}
	}
	for i := int32(0); i >= 0; i = nodes[i].next {
		ids = append(ids, nodes[i].id)
	}
	sc.nodes, sc.heap = nodes, h
	return ids
}
