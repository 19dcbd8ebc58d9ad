package cuda

import (
	"fmt"
	"os"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// gemm_wg.cu: TMA + wgmma projections for medium decode steps on the H100
// (sm_90a), whose blocks fetch their weights before they wait on the
// previous kernel (see the file's header).

const (
	wgTileM         = 64  // WG_BM: output rows of a block
	wgTileK         = 64  // WG_BK: halves of a k tile
	wgMaxKT         = 12  // WG_MAX_KT: k tiles a block holds, so K <= 768
	wgWeightBoxRows = 16  // WG_WBOX: weight rows a TMA box brings
	tensorMapBytes  = 128 // sizeof(CUtensorMap)
	wgFile          = "gemm_wg.cu"

	// cuTensorMapEncodeTiled's enums (cuda.h).
	tensorMapFloat16     = 6
	tensorMapSwizzle128B = 3
	tensorMapL2Promo256B = 3
)

// wgTilesN are the kernels' output columns a block (gemm_wg_n<BN>), smallest
// first. 48 lets a 65-128-row step spread qkv, fc and fcproj's slices over
// 96-128 SMs instead of 72-96 at 64 columns (H100, overlapped step at batch
// 128 0.846 against 0.859-0.860 ms, batch 96 and 112 10-11 us shorter).
var wgTilesN = []int{16, 32, 48, 64}

// wgKind is which kernel family of gemm_wg.cu a launch takes (its KIND).
type wgKind int

const (
	wgPlain wgKind = iota // K in one slice
	wgSplit               // K split over blocks that add into the fp32 output
	wgLN                  // K in one slice, the LayerNorm fold's epilogues
)

var wgKinds = []wgKind{wgPlain, wgSplit, wgLN}

func wgKernelName(bn int, kind wgKind) string {
	return fmt.Sprintf("gemm_wg_%sn%d", [...]string{"", "sk_", "ln_"}[kind], bn)
}

// The LayerNorm fold's epilogues (gemm_wg_ln_n<BN>, gemm_wg.cu): attproj
// adds into the residual stream and leaves x * gamma in fp16 and each row's
// sum and sum of squares; fc applies the LayerNorm from those.
const (
	wgResidualLNStats = 4 // WG_RESIDUAL_LNSTATS
	wgOut16LNFoldGelu = 5 // WG_OUT16_LNFOLD_GELU
)

func isLNFoldMode(mode int) bool { return mode == wgResidualLNStats || mode == wgOut16LNFoldGelu }

// wgLNArgs are the LayerNorm fold's arguments: lns (gamma for the stats
// epilogue, s = gamma W^T for the fold), stats (2 floats a row), x16 (the
// stats epilogue's fp16 output, rows of oc) and the LayerNorm's epsilon.
type wgLNArgs struct {
	lns, stats, x16 devPtr
	eps             float32
}

// wgPairKernelName is gemm_wg_pair's kernel with fc in bnB-column tiles
// (attproj in wgPairTileA-column ones).
func wgPairKernelName(bnB int) string { return fmt.Sprintf("gemm_wg_pair_n%d_n%d", wgPairTileA, bnB) }

const wgPairTileA = 16 // gemm_wg_pair's attproj tiles: wgTileN's choice for C = 768 at up to 128 rows

// wgKernelNames are every kernel of gemm_wg.cu.
func wgKernelNames() []string {
	var names []string
	for _, kind := range wgKinds {
		for _, bn := range wgTilesN {
			names = append(names, wgKernelName(bn, kind))
		}
	}
	for _, bn := range wgTilesN {
		names = append(names, wgPairKernelName(bn))
	}
	return names
}

// wgPairSmem is gemm_wg_pair's dynamic shared memory: x tiles (attproj's,
// then fc's) and both weight tiles over all k tiles of K, aligned.
func wgPairSmem(bnB, K int) int { return K/wgTileK*(wgTileM+wgPairTileA+bnB)*wgTileK*2 + 1024 }

// wgSmem is a block's dynamic shared memory for K: every k tile of its 64 x
// 64 x and BN x 64 weight boxes, and 1 KiB to align them to the swizzle's
// 1024-byte groups.
func wgSmem(bn, K int) int { return K/wgTileK*(wgTileM+bn)*wgTileK*2 + 1024 }

// kernelArch is the architecture NVRTC compiles file for, or "" to leave it
// out: gemm_wg.cu, q3_wg.cu and q3_attn_wg.cu need wgmma, which only sm_90a
// (NVRTC 12+) has.
func kernelArch(file, arch string, nvrtcMajor int) string {
	if file != wgFile && file != q3WGFile && file != q3AttnWGFile && file != q3GemmWSFile {
		return arch
	}
	if arch == "sm_90" && nvrtcMajor >= 12 {
		return "sm_90a"
	}
	return ""
}

// wgTileN picks the narrowest tile (the most blocks, each with the fewest
// weight rows) that still fits one block a SM for rows x oc, or 0 when oc
// is no multiple of any tile.
func wgTileN(smCount, rows, oc int) int {
	best := 0
	for i := len(wgTilesN) - 1; i >= 0; i-- {
		bn := wgTilesN[i]
		if oc%bn != 0 {
			continue
		}
		if best == 0 || oc/bn*ceilDiv(rows, wgTileM) <= smCount {
			best = bn
		}
	}
	return best
}

// encodeTensorMap describes the fp16 row-major matrix at ptr (rows x cols,
// row stride ld elements) to the TMA as boxes of boxRows x 64 with the
// 128-byte swizzle, writing the 128-byte CUtensorMap to dst (C memory).
// Rows past the matrix read as zeros.
func (g *gpu) encodeTensorMap(dst unsafe.Pointer, scratch *cArena, ptr devPtr, rows, cols, ld, boxRows int) error {
	if g.drv.cuTensorMapEncodeTiled == 0 {
		return fmt.Errorf("cuda: the driver has no cuTensorMapEncodeTiled (CUDA 12+)")
	}
	mark := scratch.off
	defer func() { scratch.off = mark }()
	buf, err := scratch.alloc(48)
	if err != nil {
		return err
	}
	dims := (*[2]uint64)(buf)
	strides := (*[1]uint64)(unsafe.Add(buf, 16))
	box := (*[2]uint32)(unsafe.Add(buf, 24))
	elem := (*[2]uint32)(unsafe.Add(buf, 32))
	*dims = [2]uint64{uint64(cols), uint64(rows)}
	*strides = [1]uint64{uint64(2 * ld)}
	*box = [2]uint32{wgTileK, uint32(boxRows)}
	*elem = [2]uint32{1, 1}
	r, _, _ := purego.SyscallN(g.drv.cuTensorMapEncodeTiled, uintptr(dst), tensorMapFloat16, 2, uintptr(ptr),
		uintptr(unsafe.Pointer(dims)), uintptr(unsafe.Pointer(strides)), uintptr(unsafe.Pointer(box)), uintptr(unsafe.Pointer(elem)),
		0, tensorMapSwizzle128B, tensorMapL2Promo256B, 0)
	if r != cuSuccess {
		return fmt.Errorf("cuda: tensor map of %d x %d (ld %d, box %d rows): %w", rows, cols, ld, boxRows, g.drv.check("cuTensorMapEncodeTiled", r))
	}
	return nil
}

// wgGemm launches gemm_wg_n<bn> over rows in clusters of cluster column
// tiles (the device passes 1: on the H100 launching without clusters gave
// 3-9 us shorter overlapped steps at every batch from 48 to 128 than
// clusters of 4 that share x rows through TMA multicast), or gemm_wg_sk_n<bn> over splits slices of K each (the residual
// epilogue): xMap and wMap are the C addresses of tensor maps of x (boxes of
// 64 rows) and W (boxes of wgWeightBoxRows rows), passed by value.
// A LayerNorm fold mode takes gemm_wg_ln_n<bn> with ln's arguments.
func (g *gpu) wgGemm(bn, cluster, splits int, out devPtr, ldo int, xMap, wMap uintptr, bias16, bias32 devPtr, rows, K, oc, mode int, ln wgLNArgs) error {
	kind := wgPlain
	switch {
	case isLNFoldMode(mode):
		kind = wgLN
	case splits > 1:
		kind = wgSplit
	}
	return g.launchClusterRefs(g.kernel(wgKernelName(bn, kind)), ceilDiv(rows, wgTileM), oc/bn, splits, cluster, 128, wgSmem(bn, K),
		[]uintptr{xMap, wMap}, argPtr(out), argInt(ldo), argPtr(bias16), argPtr(bias32),
		argInt(rows), argInt(K), argInt(oc), argInt(mode), argPtr(ln.lns), argPtr(ln.stats), argPtr(ln.x16), argF32(ln.eps))
}

// resolveWG enables gemm_wg.cu where its kernels were built (sm_90a) and the
// driver encodes tensor maps.
func (d *Device) resolveWG() error {
	d.path.wgOK, d.path.wgPairOK = false, false
	C := d.cfg.Channels
	if d.opts.force.cuBLASLt || d.g.drv.cuTensorMapEncodeTiled == 0 || C%wgTileK != 0 || C/wgTileK > wgMaxKT {
		return nil
	}
	for _, kind := range wgKinds {
		for _, bn := range wgTilesN {
			k, ok := d.g.kernels[wgKernelName(bn, kind)]
			smem := wgSmem(bn, wgMaxKT*wgTileK) // a slice of a split K may be longer than C
			if !ok || smem > d.g.smemOptIn {
				return nil
			}
			if err := d.g.setMaxDynamicSmem(k, smem); err != nil {
				return err
			}
		}
	}
	// gemm_wg_pair where every pair kernel loads and fits, and the process
	// has every SM (pairShape).
	d.path.wgPairOK = !mpsPartitioned() && !d.opts.force.noPair
	for _, bn := range wgTilesN {
		k, ok := d.g.kernels[wgPairKernelName(bn)]
		smem := wgPairSmem(bn, C)
		if !ok || smem > d.g.smemOptIn {
			d.path.wgPairOK = false
			break
		}
		if err := d.g.setMaxDynamicSmem(k, smem); err != nil {
			return err
		}
	}
	d.path.wgOK = true
	return nil
}

// buildWGMaps encodes the tensor maps gemm_wg.cu's launches pass, into C
// memory the device keeps: x maps of the projection inputs (every row of
// the buffers, so a padded step's last tile stays inside them) and W maps
// of each layer's projection weights.
func (d *Device) buildWGMaps() error {
	if !d.path.wgOK {
		return nil
	}
	C, N := d.cfg.Channels, d.opts.MaxStepTokens
	mats := []tmaMatrix{{d.act.ln, N, C, wgTileM}, {d.act.attn, N, C, wgTileM}, {d.act.fc, N, 4 * C, wgTileM}}
	for _, l := range d.w.layers {
		mats = append(mats, tmaMatrix{l.qkvW, 3 * C, C, wgWeightBoxRows}, tmaMatrix{l.attProjW, C, C, wgWeightBoxRows},
			tmaMatrix{l.fcW, 4 * C, C, wgWeightBoxRows}, tmaMatrix{l.fcProjW, C, 4 * C, wgWeightBoxRows})
	}
	var err error
	d.tma, err = d.g.encodeTensorMaps(mats)
	return err
}

// tmaMatrix is a row-major 16-bit matrix (rows x cols, dense) that
// gemm_wg.cu or q3_wg.cu reads through a tensor map in boxes of boxRows x
// 64 elements.
type tmaMatrix struct {
	ptr                 devPtr
	rows, cols, boxRows int
}

// encodeTensorMaps encodes the tensor map of each of mats into C memory of
// its own, keyed by the matrix's address. On an error nothing is kept.
func (g *gpu) encodeTensorMaps(mats []tmaMatrix) (wgMaps, error) {
	arena, err := newCArena(len(mats)*tensorMapBytes + 4096)
	if err != nil {
		return wgMaps{}, err
	}
	host, err := arena.alloc(len(mats)*tensorMapBytes + 64)
	if err != nil {
		arena.free()
		return wgMaps{}, err
	}
	host = unsafe.Pointer((uintptr(host) + 63) &^ 63) // CUtensorMap is 64-byte aligned
	maps := make(map[devPtr]uintptr, len(mats))
	for i, m := range mats {
		p := unsafe.Add(host, i*tensorMapBytes)
		if err := g.encodeTensorMap(p, arena, m.ptr, m.rows, m.cols, m.cols, m.boxRows); err != nil {
			arena.free()
			return wgMaps{}, err
		}
		maps[m.ptr] = uintptr(p)
	}
	return wgMaps{maps: maps, arena: arena}, nil
}

// wgSplits is how many slices of at most wgMaxKT k tiles a projection of
// inner size K runs as (equal slices), or 0 when none fits.
func wgSplits(K int) int {
	if K%wgTileK != 0 {
		return 0
	}
	kt := K / wgTileK
	for s := ceilDiv(kt, wgMaxKT); s <= kt; s++ {
		if kt%s == 0 {
			return s
		}
	}
	return 0
}

// useWG reports whether a projection of rows x K with the epilogue mode
// goes through gemm_wg.cu: K in one slice, or (the residual epilogue, whose
// slices add into the fp32 output: the last bits of the sums may differ
// between runs) split over blocks.
func (d *Device) useWG(rows, K, mode int) bool {
	if !d.path.wgOK || rows <= 0 || rows > d.path.wgRows || d.useSkinny(rows) || d.useGemv(rows) {
		return false
	}
	s := wgSplits(K)
	return s == 1 || s > 1 && mode == gemvResidual
}

// lnFold reports whether a step of rows folds the LayerNorm before fc into
// attproj's and fc's epilogues (attproj leaves x * gamma and each row's sum
// and sum of squares, fc applies rstd, the mean and gamma W^T, beta W^T + b):
// wherever both go through gemm_wg.cu in one K slice (K = C; in one slice
// useWG takes every epilogue alike).
func (d *Device) lnFold(rows int) bool {
	C := d.cfg.Channels
	return wgSplits(C) == 1 && d.useWG(rows, C, gemvResidual)
}

// pairShape is gemm_wg_pair's fc tile width and grid for a step of N rows,
// ok where it takes the step: the fold does, attproj takes wgPairTileA
// columns a tile and the grid fits one block an SM.
//
// Its grid barrier needs every block resident at once. The grid is at
// most one block an SM, the kernels before it end without waiting on it,
// and no kernel after it launches before its barrier (gemm_wg.cu), so on
// a GPU this process has to itself every block finds an SM. An MPS client
// limited to part of the SMs (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) may not
// have them all: there resolveWG leaves the pair off. Not launched
// cooperatively: that attribute delays the grid until the kernel before it
// has drained (no early weight fetch), which cost 14-20 us of the gain at
// batch 96-128 on the H100 (docs/cuda.md).
func (d *Device) pairShape(N int) (bnB, grid int, ok bool) {
	C := d.cfg.Channels
	if !d.path.wgPairOK || !d.lnFold(N) {
		return 0, 0, false
	}
	bnA, bnB := wgTileN(d.g.smCount, N, C), wgTileN(d.g.smCount, N, 4*C)
	if bnA != wgPairTileA || bnB == 0 {
		return 0, 0, false
	}
	grid = wgPairGrid(N, C, bnB)
	ok = grid <= d.g.smCount && ceilDiv(N, wgTileM)*wgTileM <= d.opts.MaxStepTokens
	return bnB, grid, ok
}

// wgPairGrid is gemm_wg_pair's block count for N rows of C channels, fc in
// bnB-column tiles: a block for each tile of attproj or of fc, whichever
// has more.
func wgPairGrid(N, C, bnB int) int {
	rowTiles := ceilDiv(N, wgTileM)
	return rowTiles * max(C/wgPairTileA, 4*C/bnB)
}

// mpsPartitioned reports whether this process is an MPS client limited to
// a share of the SMs.
func mpsPartitioned() bool {
	v := strings.TrimSpace(os.Getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"))
	return v != "" && v != "100"
}

// wgPair runs layer l's folded attproj and fc as one gemm_wg_pair grid
// of grid blocks, fc in bnB-column tiles (pairShape's, taken once a step;
// stats: the layer's row statistics).
func (d *Device) wgPair(l, N, bnB, grid int, stats devPtr) error {
	a, w := &d.act, &d.w.layers[l]
	return d.g.wgPairGemm(bnB, grid, N, d.cfg.Channels, wgPairArgs{
		maps:  [4]uintptr{d.tma.maps[a.attn], d.tma.maps[w.attProjW], d.tma.maps[a.ln], d.tma.maps[w.fcW]},
		resid: a.residual, fcOut: a.fc, biasA: w.attProjB, gammaA: w.ln2W, sB: w.fcLNs, bB: w.fcLNb,
		stats: stats, x16: a.ln, counter: d.pairCounter(l, N), eps: d.cfg.LayerNormEpsilon,
	})
}

// wgPairArgs are gemm_wg_pair's operands: the tensor maps of attproj's x
// and weights and of fc's x (x16) and weights, in that order; the fp32
// residual stream attproj adds into and fc's fp16 output; attproj's bias
// and the LayerNorm's gamma; fc's folded s and b'; the rows' statistics,
// x16 and the grid barrier's counter (both zeroed); the LayerNorm's eps.
type wgPairArgs struct {
	maps                                [4]uintptr
	resid, fcOut, biasA, gammaA, sB, bB devPtr
	stats, x16, counter                 devPtr
	eps                                 float32
}

// wgPairGemm launches gemm_wg_pair_n16_n<bnB> over grid blocks for M rows
// of C channels (fc: 4C columns).
func (g *gpu) wgPairGemm(bnB, grid, M, C int, a wgPairArgs) error {
	return g.launchClusterRefs(g.kernel(wgPairKernelName(bnB)), grid, 1, 1, 1, 128, wgPairSmem(bnB, C), a.maps[:],
		argPtr(a.resid), argPtr(a.fcOut), argPtr(a.biasA), argPtr(a.gammaA), argPtr(a.sB), argPtr(a.bB),
		argPtr(a.stats), argPtr(a.x16), argInt(M), argInt(C), argInt(C), argInt(4*C), argF32(a.eps), argPtr(a.counter))
}

// wg runs out = x @ w^T through gemm_wg.cu when useWG takes the step, both
// have tensor maps and oc fits a tile, reporting false (nothing launched)
// otherwise.
func (d *Device) wg(out devPtr, ldo int, x, w, bias16, bias32 devPtr, rows, K, oc, mode int) (bool, error) {
	return d.wgLN(out, ldo, x, w, bias16, bias32, rows, K, oc, mode, wgLNArgs{})
}

// wgLN is wg for every epilogue, the LayerNorm fold's (ln) too.
func (d *Device) wgLN(out devPtr, ldo int, x, w, bias16, bias32 devPtr, rows, K, oc, mode int, ln wgLNArgs) (bool, error) {
	if !d.useWG(rows, K, mode) {
		return false, nil
	}
	xMap, okX := d.tma.maps[x]
	wMap, okW := d.tma.maps[w]
	splits := wgSplits(K)
	bn := wgTileN(d.g.smCount/splits, rows, oc)
	if !okX || !okW || bn == 0 || ceilDiv(rows, wgTileM)*wgTileM > d.opts.MaxStepTokens {
		return false, nil
	}
	return true, d.g.wgGemm(bn, 1, splits, out, ldo, xMap, wMap, bias16, bias32, rows, K/splits, oc, mode, ln)
}
