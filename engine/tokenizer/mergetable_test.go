package tokenizer

import "testing"

// TestMergeTable against a Go map on many keys (collisions included, since
// the table is small for its load), with duplicates keeping the first.
func TestMergeTable(t *testing.T) {
	const n = 5000
	m := newMergeTable(n)
	want := map[uint64]uint64{}
	for i := range n {
		key := pairKey(int32(i*7919%n), int32(i%97))
		m.putFirst(key, packMerge(uint32(i), int32(i)))
		if _, dup := want[key]; !dup {
			want[key] = packMerge(uint32(i), int32(i))
		}
	}
	for key, v := range want {
		if got := m.get(key); got != v {
			t.Fatalf("get(%#x) = %#x, want %#x", key, got, v)
		}
	}
	for _, key := range []uint64{pairKey(n+1, 0), pairKey(0, 200), 0} {
		if _, ok := want[key]; !ok && m.get(key) != noMerge {
			t.Errorf("get(%#x) of an absent key = %#x, want noMerge", key, m.get(key))
		}
	}
}
