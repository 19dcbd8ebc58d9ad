package ab

import "strings"

// Order is the sequence of rounds for n round pairs: ABBA ABBA ..., i.e.
// pair i runs A then B when i is even and B then A when it is odd. Each
// element is 0 (A) or 1 (B).
//
// Why ABBA and not ABAB: in ABAB, B always runs right after A, so a machine
// that drifts during the experiment (a warming or throttling CPU, a filling
// page cache, a neighbour starting a job) moves B's figures against A's by
// the drift of one round, every pair in the same direction, and the ratio
// carries that as a bias no number of rounds removes. In ABBA each block of
// two pairs puts A's rounds at times 1 and 4 and B's at 2 and 3: the same
// mean time, so a linear drift cancels within every block, and each side is
// first in a pair as often as second, so an effect of going first (or of
// following the other server) cancels too. An odd number of pairs leaves
// one pair of the last block unmatched; an even number cancels exactly.
func Order(numPairs int) []int {
	out := make([]int, 0, 2*numPairs)
	for i := range numPairs {
		if i%2 == 0 {
			out = append(out, 0, 1)
		} else {
			out = append(out, 1, 0)
		}
	}
	return out
}

// OrderString writes an order as letters, e.g. "ABBAAB".
func OrderString(order []int) string {
	var b strings.Builder
	for _, s := range order {
		b.WriteByte("AB"[s])
	}
	return b.String()
}
