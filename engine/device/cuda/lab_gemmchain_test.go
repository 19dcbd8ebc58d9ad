//go:build cudalab

package cuda

import (
	"testing"

	"github.com/roseinfer/roseinfer/engine/model"
)

// TestGemmChain runs the projection diagnostics on a small model: every
// implementation's chain of projections ends where cuBLASLt's does (a
// kernel that lost a split or a k group would not), with and without the
// LayerNorm kernels, with every layer's weights or layer 0's in each, and
// each projection kind alone; the timings are positive; an unknown implementation
// and a row count the small-batch kernels own are errors.
func TestGemmChain(t *testing.T) {
	w, err := model.InitRandom(smallConfig, 51)
	if err != nil {
		t.Fatal(err)
	}
	d := newTestDevice(t, w, Options{MaxStepTokens: 256, MaxSeqs: 64})
	if !d.path.skinnyOK {
		t.Skipf("%s: gemm_skinny needs thread-block clusters", d.GPUName())
	}
	for _, impl := range GemmChainImpls() {
		if impl == "wgmma" && !d.path.wgOK {
			if kernelArch(wgFile, d.g.arch, d.g.nv.major) != "" {
				t.Errorf("%s: gemm_wg.cu was built but is not enabled", d.GPUName())
			}
			continue
		}
		for _, rows := range []int{24, 100} {
			opts := []ChainOptions{{LN: rows == 100}, {LN: rows == 100, OneLayer: true}}
			for _, kind := range ProjectionKinds {
				opts = append(opts, ChainOptions{Only: kind})
			}
			for _, o := range opts {
				us, diff, err := d.GemmChain(rows, impl, o)
				if err != nil {
					t.Fatalf("%s, %d rows, %+v: %v", impl, rows, o, err)
				}
				if us <= 0 || diff > 1e-3 {
					t.Errorf("%s, %d rows, %+v: %.2f us a projection, rel diff from cuBLASLt %.1e", impl, rows, o, us, diff)
				}
			}
		}
	}
	if _, _, err := d.GemmChain(24, "no-such-kernel", ChainOptions{}); err == nil {
		t.Error("an unknown implementation ran")
	}
	if _, _, err := d.GemmChain(24, "cublaslt", ChainOptions{Only: "lmhead"}); err == nil {
		t.Error("an unknown projection kind ran")
	}
	if _, _, err := d.GemmChain(8, "cublaslt", ChainOptions{}); err == nil {
		t.Error("a chain of 8 rows (the GEMV kernels' range) ran")
	}
	for _, cluster := range []int{1, 4} {
		if us, err := d.LaunchCost(8, cluster, 64<<10, 24, true); err != nil || us <= 0 {
			t.Errorf("launch cost, clusters of %d: %.2f us, %v", cluster, us, err)
		}
	}
	if gbs, err := d.L2BroadcastGBs(4, 64<<10); err != nil || gbs <= 0 {
		t.Errorf("L2 broadcast %.1f GB/s, %v", gbs, err)
	}
}
