package cuda

import "testing"

// TestSkinnyShapeFor: on an H100 (132 SMs) the GPT-2 projections at the
// row counts of medium and large decode batches get shapes that fit in one
// wave of blocks, within the portable cluster size, with at least one k
// tile per split and as many splits as fit; a K that is no multiple of the
// k tile gets none.
func TestSkinnyShapeFor(t *testing.T) {
	const sms = 132
	for _, M := range []int{17, 32, 33, 64, 100, 128} {
		for _, c := range [][2]int{{2304, 768}, {3072, 768}, {768, 768}, {768, 3072}, {100, 256}} {
			oc, K := c[0], c[1]
			sh := skinnyShapeFor(sms, M, oc, K)
			blocks := ceilDiv(oc, skinnyTileN) * ceilDiv(M, sh.bm) * sh.splits
			wantBM := 64
			if M <= 32 {
				wantBM = 32
			}
			if sh.bm != wantBM || sh.splits < 1 || sh.splits > maxSkinnySplits || sh.smem != skinnySmem(sh.bm) ||
				(sh.splits > 1 && blocks > sms) || K/skinnyTileK < sh.splits {
				t.Errorf("M %d oc %d K %d: shape %+v (%d blocks) is not launchable in one wave", M, oc, K, sh, blocks)
			}
			if sh.splits < min(maxSkinnySplits, K/skinnyTileK) && blocks/sh.splits*(sh.splits+1) <= sms {
				t.Errorf("M %d oc %d K %d: %d splits leave SMs idle (%d blocks)", M, oc, K, sh.splits, blocks)
			}
		}
	}
	if sh := skinnyShapeFor(sms, 64, 768, 96); sh != (skinnyShape{}) {
		t.Errorf("K 96 is no multiple of the k tile but got %+v", sh)
	}
}
