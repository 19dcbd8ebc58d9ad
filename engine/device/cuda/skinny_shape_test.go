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
			sh := skinnyShapeFor(sms, M, oc, K, nil)
			blocks := ceilDiv(oc, skinnyTileN) * ceilDiv(M, sh.k.bm) * sh.splits
			wantBM := 64
			if M <= 32 {
				wantBM = 32
			}
			if sh.k.bm != wantBM || sh.splits < 1 || sh.splits > maxSkinnySplits ||
				(sh.splits > 1 && blocks > sms) || K/skinnyTileK < sh.splits {
				t.Errorf("M %d oc %d K %d: shape %+v (%d blocks) is not launchable in one wave", M, oc, K, sh, blocks)
			}
			if sh.splits < min(maxSkinnySplits, K/skinnyTileK) && blocks/sh.splits*(sh.splits+1) <= sms {
				t.Errorf("M %d oc %d K %d: %d splits leave SMs idle (%d blocks)", M, oc, K, sh.splits, blocks)
			}
		}
	}
	if sh := skinnyShapeFor(sms, 64, 768, 96, nil); sh != (skinnyShape{}) {
		t.Errorf("K 96 is no multiple of the k tile but got %+v", sh)
	}
}

// TestSkinnyKernelSmem: every gemm_skinny kernel's shared memory holds its
// pipeline, the split epilogue's partial tile and the k groups' sums, and
// fits an H100's 227 KiB opt-in; its threads share a weight tile evenly.
func TestSkinnyKernelSmem(t *testing.T) {
	for _, k := range skinnyKernels {
		warpN := 4
		if k.bm == 64 {
			warpN = 2
		}
		sums := (k.groups - 1) * 4 * 32 * 2 * (skinnyTileN / warpN / 8) * 4 * 4
		if s := k.smem(); s < k.stages*(k.bm+skinnyTileN)*128 || s < k.bm*(skinnyTileN+4)*4 || s < sums || s > 227*1024 {
			t.Errorf("%s: %d bytes of shared memory", k.name, s)
		}
		if (skinnyTileN*8)%k.threads() != 0 { // load_w: every thread copies as many weight pieces
			t.Errorf("%s: %d threads do not divide a weight tile's %d pieces", k.name, k.threads(), skinnyTileN*8)
		}
	}
}
