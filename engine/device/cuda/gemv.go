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

// Epilogues: GEMV_* in gemv.cu.
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
	return d.gemvOK && rows > 0 && rows <= d.opts.GemvMaxRows
}

// gemvShape picks the kernel variant and grid for rows x oc: two 8-column
// tiles per block when that still gives every SM a block, and a grid of at
// most perSM blocks per SM (the kernels loop over tiles; the LayerNorm
// kernels stage their rows once per block, so fewer blocks) on all SMs but
// spareSMs.
func (d *Device) gemvShape(ln bool, rows, oc, perSM, spareSMs int) (kernel, int) {
	big, nt := 0, 0
	if rows > 8 {
		big = 1
	}
	if ceilDiv(oc, 16) >= d.g.smCount {
		nt = 1
	}
	lnIdx := 0
	if ln {
		lnIdx = 1
	}
	tiles := ceilDiv(oc, 8*(nt+1))
	return d.kGemv[lnIdx][big][nt], min(tiles, perSM*max(1, d.g.smCount-spareSMs))
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

// skinnyShape is how gemm_skinny covers an (M, oc, K) projection: bm rows
// per block (32 or 64), S splits of K, smem bytes of dynamic shared memory
// per block.
type skinnyShape struct{ bm, splits, smem int }

// skinnyShapeFor picks 32-row tiles for at most 32 rows, 64-row tiles
// otherwise, and as many splits of K as keep the blocks within one per SM:
// every block then streams the fewest bytes without a second wave. Zero
// when K is not a multiple of the k tile.
func skinnyShapeFor(smCount, M, oc, K int) skinnyShape {
	if K%skinnyTileK != 0 || K == 0 || M <= 0 || oc <= 0 {
		return skinnyShape{}
	}
	bm := 64
	if M <= 32 {
		bm = 32
	}
	tiles := ceilDiv(oc, skinnyTileN) * ceilDiv(M, bm)
	S := 1
	for s := 2; s <= min(maxSkinnySplits, K/skinnyTileK); s++ {
		if tiles*s <= smCount {
			S = s
		}
	}
	return skinnyShape{bm: bm, splits: S, smem: skinnySmem(bm)}
}

// skinnySmem is gemm_skinny_m<bm>'s dynamic shared memory: its pipeline's
// stages (the partial tile of the split epilogue fits in them).
func skinnySmem(bm int) int { return skinnyStages * (bm + skinnyTileN) * 2 * skinnyTileK }

// useSkinny reports whether the layer projections over rows token rows go
// through gemm_skinny.cu.
func (d *Device) useSkinny(rows int) bool {
	return d.skinnyOK && rows > 0 && rows <= d.opts.SkinnyGemmRows && rows <= maxSkinnyRows
}

// skinny: out(rows, oc) = x(rows, K; row stride ldx) @ w^T with the epilogue
// mode (bias16 for the fp16 modes, bias32 for the residual one).
func (d *Device) skinny(out devPtr, ldo int, x devPtr, ldx int, w, bias16, bias32 devPtr, rows, K, oc, mode int) error {
	sh := skinnyShapeFor(d.g.smCount, rows, oc, K)
	return d.g.skinnyGemm(d.kSkinny[sh.bm/64], sh, out, ldo, x, ldx, w, bias16, bias32, rows, K, oc, mode)
}

// skinnyGemm launches one gemm_skinny_m<bm> over sh.
func (g *gpu) skinnyGemm(k kernel, sh skinnyShape, out devPtr, ldo int, x devPtr, ldx int, w, bias16, bias32 devPtr, rows, K, oc, mode int) error {
	return g.launchCluster(k, ceilDiv(oc, skinnyTileN), sh.splits, ceilDiv(rows, sh.bm), sh.splits, skinnyThreads, sh.smem,
		argPtr(out), argInt(ldo), argPtr(x), argInt(ldx), argPtr(w), argPtr(bias16), argPtr(bias32),
		argInt(rows), argInt(K), argInt(oc), argInt(mode))
}
