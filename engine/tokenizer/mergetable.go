package tokenizer

import "math/bits"

// mergeTable maps a pair key (pairKey) to its packed merge (packMerge). It is
// an open-addressing hash table with linear probing over interleaved
// key/value slots: BPE spends about half its time looking pairs up, and one
// cache line holding both key and value beats Go's map here (measured with
// BenchmarkEncode). It is filled once in newTokenizer and only read after.
type mergeTable struct {
	slots [][2]uint64 // {key, packed merge}; key emptyPair = free
	shift uint        // 64 - log2(len(slots))
}

// emptyPair marks a free slot: pairKey(-1, -1), which no vocabulary has.
const emptyPair = ^uint64(0)

func newMergeTable(numMerges int) mergeTable {
	logSize := bits.Len(uint(2 * numMerges)) // at least 2 slots per merge: load factor 1/4 to 1/2
	slots := make([][2]uint64, 1<<logSize)
	for i := range slots {
		slots[i][0] = emptyPair
	}
	return mergeTable{slots: slots, shift: uint(64 - logSize)}
}

func (m *mergeTable) home(key uint64) uint64 { return (key * 0x9E3779B97F4A7C15) >> m.shift }

// get returns the merge of key, or noMerge.
func (m *mergeTable) get(key uint64) uint64 {
	mask := uint64(len(m.slots) - 1)
	for i := m.home(key); ; i = (i + 1) & mask {
		s := &m.slots[i]
		if s[0] == key {
			return s[1]
		}
		if s[0] == emptyPair {
			return noMerge
		}
	}
}

// putFirst stores merge under key unless key is already there (HF keeps the
// first, lowest-rank, of duplicate merges).
func (m *mergeTable) putFirst(key, merge uint64) {
	mask := uint64(len(m.slots) - 1)
	for i := m.home(key); ; i = (i + 1) & mask {
		s := &m.slots[i]
		if s[0] == key {
			return
		}
		if s[0] == emptyPair {
			s[0], s[1] = key, merge
			return
		}
	}
}
