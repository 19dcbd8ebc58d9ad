package cuda

import "testing"

// TestSkinnyShapeFor: on an H100 (132 SMs) the GPT-2 projections get shapes
// that fit in one wave of blocks, within the portable cluster size and the
// opt-in shared memory, and cover K with chunks of 32.
func TestSkinnyShapeFor(t *testing.T) {
	const sms, optIn = 132, 227 << 10
	for _, c := range [][2]int{{2304, 768}, {3072, 768}, {768, 768}, {768, 3072}, {100, 256}} {
		oc, K := c[0], c[1]
		sh := skinnyShapeFor(sms, oc, K)
		blocks := ceilDiv(oc, sh.bn) * sh.splits
		perSM := min(skinnyBlocksPerSM, smemPerSM/(sh.smem+1024))
		if sh.bn != 32 && sh.bn != 64 || sh.splits < 1 || sh.splits > maxSkinnySplits || sh.smem > optIn ||
			blocks > perSM*sms || K/32 < sh.splits {
			t.Errorf("oc %d K %d: shape %+v (%d blocks, %d per SM) is not launchable in one wave", oc, K, sh, blocks, perSM)
		}
		t.Logf("oc %d K %d: bn %d, %d splits, %d blocks, %d B shared", oc, K, sh.bn, sh.splits, blocks, sh.smem)
	}
}
