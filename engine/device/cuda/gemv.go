package cuda

import "fmt"

// Small-batch projections (gemv.cu): steps of at most maxGemvRows token rows
// run each projection as one tensor-core GEMV launch that reads the weights
// once at full bandwidth, with the preceding LayerNorm fused in, instead of
// a LayerNorm kernel plus a cuBLASLt GEMM whose tiles leave most SMs idle.

const (
	maxGemvRows     = 16   // the kernels' largest row tile (MR)
	gemvMaxChannels = 1024 // GEMV_MAXC: LayerNorm rows staged in shared memory
	gemvThreads     = 256  // GEMV_WARPS * 32
)

// Epilogues: GEMV_* in mma.cuh.
const (
	gemvOut16Bias     = 0 // fp16 out = acc + fp16 bias
	gemvOut16BiasGelu = 1 // fp16 out = gelu(acc + fp16 bias)
	gemvResidual      = 2 // fp32 out += acc + fp32 bias
	gemvOut32         = 3 // fp32 out = acc
)

func gemvKernelName(ln, rows16, tiles2 bool) string {
	name := "gemv_"
	if ln {
		name += "ln_"
	}
	mr, nt := 8, 1
	if rows16 {
		mr = 16
	}
	if tiles2 {
		nt = 2
	}
	return fmt.Sprintf("%sr%d_n%d", name, mr, nt)
}

func gemvKernelNames() []string {
	var names []string
	for _, ln := range []bool{false, true} {
		for _, r := range []bool{false, true} {
			for _, t := range []bool{false, true} {
				names = append(names, gemvKernelName(ln, r, t))
			}
		}
	}
	return names
}

// useGemv reports whether a projection over rows token rows goes through gemv.cu.
func (d *Device) useGemv(rows int) bool {
	return d.path.gemvOK && rows > 0 && rows <= maxGemvRows
}

// gemvShape picks the kernel variant and grid for rows x oc: two 8-column
// tiles per block when that still gives every SM a block, and a grid of at
// most perSM blocks per SM (the kernels loop over tiles; the LayerNorm
// kernels stage their rows once per block, so fewer blocks) on all SMs but
// spareSMs.
func (d *Device) gemvShape(ln bool, rows, oc, perSM, spareSMs int) (kernel, int) {
	big, nt, grid := d.gemvGrid(rows, oc, perSM, spareSMs)
	lnIdx := 0
	if ln {
		lnIdx = 1
	}
	return d.k.gemv[lnIdx][big][nt], grid
}

// gemvGrid is gemvShape's choice as indices: big 1 for the 16-row tile, nt
// 1 for two column tiles a block, and the grid.
func (d *Device) gemvGrid(rows, oc, perSM, spareSMs int) (big, nt, grid int) {
	if rows > 8 {
		big = 1
	}
	if ceilDiv(oc, 16) >= d.g.smCount {
		nt = 1
	}
	tiles := ceilDiv(oc, 8*(nt+1))
	return big, nt, min(tiles, perSM*max(1, d.g.smCount-spareSMs))
}

// gemvLN: out(rows, oc) = LayerNorm(resid[sel[i]] or resid[i]; lnW, lnB) @ w^T,
// then the epilogue (bias16 for the fp16 modes). sel = 0: the first rows rows.
// spareSMs SMs are left free for the kernel that follows (gemvShape).
func (d *Device) gemvLN(out devPtr, ldo int, resid, sel, lnW, lnB, w, bias16 devPtr, rows, oc, mode, spareSMs int) error {
	k, grid := d.gemvShape(true, rows, oc, 2, spareSMs)
	return d.g.launch(k, grid, 1, 1, gemvThreads, 0,
		argPtr(out), argInt(ldo), argPtr(resid), argPtr(sel), argPtr(lnW), argPtr(lnB), argF32(d.cfg.LayerNormEpsilon),
		argPtr(w), argPtr(bias16), argPtr(0), argInt(rows), argInt(d.cfg.Channels), argInt(oc), argInt(mode))
}

// gemv: out(rows, oc) (+)= x(rows, K; row stride ldx) @ w^T + bias32 with
// the residual epilogue (the only one the model uses without LayerNorm).
func (d *Device) gemv(out devPtr, ldo int, x devPtr, ldx int, w, bias32 devPtr, rows, K, oc, mode int) error {
	k, grid := d.gemvShape(false, rows, oc, 4, 0)
	return d.g.launch(k, grid, 1, 1, gemvThreads, 0,
		argPtr(out), argInt(ldo), argPtr(x), argInt(ldx), argPtr(w), argPtr(0), argPtr(bias32),
		argInt(rows), argInt(K), argInt(oc), argInt(mode))
}

// Medium batches (gemm_skinny.cu): steps of maxGemvRows+1 .. maxSkinnyRows
// token rows run the four layer projections through a pipelined split-K
// tensor-core kernel, its splits meeting in a thread-block cluster (Hopper),
// instead of cuBLASLt (LayerNorm stays a kernel of its own).

const (
	maxSkinnyRows   = 128 // the largest step the kernel may be chosen for
	maxSkinnySplits = 8   // SK_MAX_SPLITS: the portable cluster size
	skinnyTileN     = 64  // SK_BN: output columns per block
	skinnyTileK     = 64  // SK_BK: K must be a multiple
	skinnyStages    = 12  // SK_STAGES
	skinnyThreads   = 128 // SK_THREADS
)

// skinnyKernel is one compiled gemm_skinny kernel (a GEMM_SKINNY line of
// gemm_skinny.cu): bm rows per block, groups k groups of 4 warps, a
// pipeline of stages k tiles.
type skinnyKernel struct {
	name               string
	bm, groups, stages int
}

// skinnyKernels are gemm_skinny.cu's kernels: the first two are the
// defaults for at most 32 rows and above (skinnyKernelFor), the others
// alternatives cudabench's projection diagnostics time.
var skinnyKernels = []skinnyKernel{
	{"gemm_skinny_m32", 32, 2, skinnyStages},
	{"gemm_skinny_m64", 64, 2, skinnyStages},
	{"gemm_skinny_m32_g1", 32, 1, skinnyStages},
}

// skinnyKernelFor is the default kernel for M rows: 32-row tiles for at
// most 32 rows, 64-row tiles above.
func skinnyKernelFor(M int) skinnyKernel {
	if M <= 32 {
		return skinnyKernels[0]
	}
	return skinnyKernels[1]
}

// skinnyKernelNames lists gemm_skinny.cu's kernels.
func skinnyKernelNames() []string {
	var names []string
	for _, k := range skinnyKernels {
		names = append(names, k.name)
	}
	return names
}

func (k skinnyKernel) threads() int { return k.groups * skinnyThreads }

// smem is the kernel's dynamic shared memory: its pipeline's stages, which
// the k groups' sums and the split epilogue's partial tile reuse.
func (k skinnyKernel) smem() int {
	stages := k.stages * (k.bm + skinnyTileN) * 2 * skinnyTileK
	part := k.bm * (skinnyTileN + 4) * 4 // SK_PSTRIDE floats a row
	warpN := 4
	if k.bm == 64 {
		warpN = 2
	}
	perWarp := 2 * (skinnyTileN / warpN / 8) * 4 * 32 * 4 // a warp's accumulators
	return max(stages, part, (k.groups-1)*4*perWarp)
}

// skinnyShape is how gemm_skinny covers an (M, oc, K) projection: kernel
// k (bm rows per block) and S splits of K.
type skinnyShape struct {
	k      skinnyKernel
	splits int
}

// skinnyShapeFor picks skinnyKernelFor(M) (or v, when not nil) and as many
// splits of K as keep the blocks within one per SM: every block then streams
// the fewest bytes without a second wave. Zero when K is not a multiple of
// the k tile.
func skinnyShapeFor(smCount, M, oc, K int, v *skinnyKernel) skinnyShape {
	if K%skinnyTileK != 0 || K == 0 || M <= 0 || oc <= 0 {
		return skinnyShape{}
	}
	k := skinnyKernelFor(M)
	if v != nil {
		k = *v
	}
	tiles := ceilDiv(oc, skinnyTileN) * ceilDiv(M, k.bm)
	S := 1
	for s := 2; s <= min(maxSkinnySplits, K/skinnyTileK); s++ {
		if tiles*s <= smCount {
			S = s
		}
	}
	return skinnyShape{k: k, splits: S}
}

// useSkinny reports whether the layer projections over rows token rows go
// through gemm_skinny.cu.
func (d *Device) useSkinny(rows int) bool {
	return d.path.skinnyOK && rows > 0 && rows <= d.path.skinnyRows && rows <= maxSkinnyRows
}

// skinny: out(rows, oc) = x(rows, K; row stride ldx) @ w^T with the epilogue
// mode (bias16 for the fp16 modes, bias32 for the residual one).
func (d *Device) skinny(out devPtr, ldo int, x devPtr, ldx int, w, bias16, bias32 devPtr, rows, K, oc, mode int) error {
	sh := skinnyShapeFor(d.g.smCount, rows, oc, K, d.path.skinnyVariant)
	return d.g.skinnyGemm(d.g.kernel(sh.k.name), sh, out, ldo, x, ldx, w, bias16, bias32, rows, K, oc, mode)
}

// skinnyGemm launches one gemm_skinny kernel over sh.
func (g *gpu) skinnyGemm(k kernel, sh skinnyShape, out devPtr, ldo int, x devPtr, ldx int, w, bias16, bias32 devPtr, rows, K, oc, mode int) error {
	return g.launchCluster(k, ceilDiv(oc, skinnyTileN), sh.splits, ceilDiv(rows, sh.k.bm), sh.splits, sh.k.threads(), sh.k.smem(),
		argPtr(out), argInt(ldo), argPtr(x), argInt(ldx), argPtr(w), argPtr(bias16), argPtr(bias32),
		argInt(rows), argInt(K), argInt(oc), argInt(mode))
}
