package cuda

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestWgmmaGemm runs gemm_wg.cu's kernels against a float64 reference over
// the model's shapes at the decode row counts it serves and over odd ones:
// rows that are no multiple of the 64-row tile (the TMA zero-fills the
// rest), one and four k tiles, every tile width and epilogue, and K split
// over blocks (the residual epilogue's atomic adds).
func TestWgmmaGemm(t *testing.T) {
	g := wgTestGPU(t, wgFile, wgKernelNames())
	r := rand.New(rand.NewPCG(43, 44))
	for i, c := range []struct{ M, K, OC, mode, bn, cluster int }{
		{128, 768, 2304, gemvOut16Bias, 0, 4}, // 0: the width the device picks
		{128, 768, 3072, gemvOut16BiasGelu, 0, 4},
		{128, 768, 768, gemvResidual, 0, 4},
		{128, 768, 2304, gemvOut16Bias, 0, 1},
		{128, 768, 768, gemvResidual, 0, 2},
		{33, 768, 2304, gemvOut16Bias, 0, 4},
		{48, 768, 768, gemvResidual, 0, 2},
		{100, 768, 768, gemvOut32, 32, 4},
		{64, 256, 96, gemvResidual, 16, 2}, // 4 k tiles: two a block of the cluster
		{100, 192, 128, gemvOut32, 32, 4},  // 3 k tiles for 4 blocks: one fetches none
		{7, 64, 64, gemvOut16BiasGelu, 64, 1},
		{129, 512, 128, gemvOut16Bias, 64, 2},
		{128, 3072, 768, gemvResidual, 0, 4}, // fcproj: K in 4 slices
		{64, 3072, 768, gemvResidual, 0, 2},
		{45, 1024, 256, gemvResidual, 16, 1}, // 2 slices, rows no multiple of 64
	} {
		splits := wgSplits(c.K)
		bn := c.bn
		if bn == 0 {
			bn = wgTileN(g.smCount/splits, c.M, c.OC)
		}
		t.Run(fmt.Sprintf("M%d_K%d_OC%d_mode%d_n%d_cluster%d", c.M, c.K, c.OC, c.mode, bn, c.cluster), func(t *testing.T) {
			runWgCase(t, testGPU(t), r, c.M, c.K, c.OC, c.mode, bn, c.cluster, i%2 == 0)
		})
	}
}

func runWgCase(t *testing.T, g *gpu, r *rand.Rand, M, K, OC, mode, bn, cluster int, twice bool) {
	c := newProjCase(t, g, r, M, K, OC, mode)
	splits, kind := wgSplits(K), wgPlain
	if splits > 1 {
		kind = wgSplit
	}
	if err := g.setMaxDynamicSmem(g.kernel(wgKernelName(bn, kind)), wgSmem(bn, K/splits)); err != nil {
		t.Fatal(err)
	}
	xMap, wMap := testWGMaps(t, g, c.dx, M, K, c.ldx, c.dW, OC)
	c.runAndCheck(t, g, twice, func() error {
		return g.wgGemm(bn, cluster, splits, c.out, c.ldo, xMap, wMap, c.db16, c.db32, M, K/splits, OC, mode, wgLNArgs{})
	})
}

// wgTestGPU is the test GPU where NVRTC built file (gemm_wg.cu, q3_wg.cu:
// sm_90a only), with every one of its kernels loaded; elsewhere it skips.
func wgTestGPU(t *testing.T, file string, kernels []string) *gpu {
	t.Helper()
	g := testGPU(t)
	if kernelArch(file, g.arch, g.nv.major) == "" {
		t.Skipf("%s is built for sm_90a by NVRTC 12+ only; here %s, NVRTC %d.%d", file, g.arch, g.nv.major, g.nv.minor)
	}
	for _, name := range kernels {
		if _, ok := g.kernels[name]; !ok {
			t.Fatalf("%s was not loaded", name)
		}
	}
	return g
}

// testWGMaps encodes the tensor maps of x (M x K, rows ldx apart, boxes of
// a 64-row tile) and W (OC x K, boxes of wgWeightBoxRows rows) in C memory
// the test frees at its end, returning their addresses.
func testWGMaps(t *testing.T, g *gpu, x devPtr, M, K, ldx int, w devPtr, OC int) (xMap, wMap uintptr) {
	t.Helper()
	return testTMAMaps(t, g, x, M, K, ldx, wgTileM, w, OC, wgWeightBoxRows)
}

// testTMAMaps encodes the tensor maps of x (M x K, rows ldx apart, boxes of
// xBox rows) and W (OC x K, boxes of wBox rows) in C memory the test frees
// at its end, returning their addresses.
func testTMAMaps(t *testing.T, g *gpu, x devPtr, M, K, ldx, xBox int, w devPtr, OC, wBox int) (xMap, wMap uintptr) {
	t.Helper()
	arena, err := newCArena(4096)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(arena.free)
	host, _ := arena.alloc(3 * tensorMapBytes)
	host = unsafe.Pointer((uintptr(host) + 63) &^ 63) // CUtensorMap is 64-byte aligned
	xp, wp := host, unsafe.Add(host, tensorMapBytes)
	if err := g.encodeTensorMap(xp, arena, x, M, K, ldx, xBox); err != nil {
		t.Fatal(err)
	}
	if err := g.encodeTensorMap(wp, arena, w, OC, K, K, wBox); err != nil {
		t.Fatal(err)
	}
	return uintptr(xp), uintptr(wp)
}

func TestWgSplits(t *testing.T) {
	for _, c := range []struct{ K, want int }{{768, 1}, {64, 1}, {3072, 4}, {1024, 2}, {832, 13}, {100, 0}} {
		if got := wgSplits(c.K); got != c.want {
			t.Errorf("wgSplits(%d) = %d, want %d", c.K, got, c.want)
		}
	}
}

func TestWgTileN(t *testing.T) {
	for _, c := range []struct{ rows, oc, want int }{
		{128, 2304, 48}, // 96 blocks; 32 would be 144
		{128, 3072, 48}, // 128
		{128, 768, 16},  // 96
		{64, 2304, 32},  // 72
		{64, 768, 16},   // 48
		{256, 3072, 64}, // 192 blocks at any width: the widest
		{128, 100, 0},   // no multiple of 16
	} {
		if got := wgTileN(132, c.rows, c.oc); got != c.want {
			t.Errorf("wgTileN(132, %d, %d) = %d, want %d", c.rows, c.oc, got, c.want)
		}
	}
}

func TestWgClusterFor(t *testing.T) {
	for _, c := range []struct{ want, tiles, got int }{{4, 36, 4}, {4, 18, 2}, {4, 9, 1}, {2, 48, 2}, {0, 48, 1}, {1, 7, 1}} {
		if got := wgClusterFor(c.want, c.tiles); got != c.got {
			t.Errorf("wgClusterFor(%d, %d) = %d, want %d", c.want, c.tiles, got, c.got)
		}
	}
}

func TestKernelArch(t *testing.T) {
	for _, c := range []struct {
		file, arch string
		nv         int
		want       string
	}{
		{"gemv.cu", "sm_90", 11, "sm_90"},
		{wgFile, "sm_90", 13, "sm_90a"},
		{wgFile, "sm_90", 11, ""},
		{wgFile, "sm_100", 13, ""},
		{wgFile, "sm_80", 13, ""},
		{q3WGFile, "sm_90", 13, "sm_90a"},
		{q3WGFile, "sm_90", 11, ""},
		{q3AttnWGFile, "sm_90", 13, "sm_90a"},
		{q3AttnWGFile, "sm_100", 13, ""},
	} {
		if got := kernelArch(c.file, c.arch, c.nv); got != c.want {
			t.Errorf("kernelArch(%s, %s, %d) = %q, want %q", c.file, c.arch, c.nv, got, c.want)
		}
	}
}

// TestMPSPartitioned checks which MPS settings keep gemm_wg_pair off: its
// grid barrier needs every SM, which a client limited to a share may not
// have (no GPU needed).
func TestMPSPartitioned(t *testing.T) {
	for _, c := range []struct {
		env  string
		want bool
	}{{"", false}, {"100", false}, {" 100 ", false}, {"50", true}, {"12.5", true}} {
		t.Setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", c.env)
		if got := mpsPartitioned(); got != c.want {
			t.Errorf("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%q: partitioned %v, want %v", c.env, got, c.want)
		}
	}
}

// wgClusterFor is the largest cluster of at most want (a power of two)
// column tiles that divides tiles: how the tests launch gemm_wg.cu in
// clusters (the device launches it without).
func wgClusterFor(want, tiles int) int {
	c := max(want, 1)
	for c > 1 && tiles%c != 0 {
		c /= 2
	}
	return c
}
