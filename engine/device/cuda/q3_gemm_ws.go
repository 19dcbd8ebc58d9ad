package cuda

import (
	"cmp"
	"fmt"
)

// q3_gemm_ws.cu: gate|up with SwiGLU in its epilogue on Hopper (sm_90a),
// a warp-specialised TMA + wgmma kernel of our own where cuBLASLt has no
// SwiGLU epilogue, for steps of at least q3GemmWSMinRows token rows: the
// step neither writes the gate|up activations nor reads them back through
// q3_swiglu. On the H100 (Qwen3-0.6B's 1,024 x 6,144, lab timing test) it
// took 295 us at 16,384 rows against 356 for cuBLASLt's GEMM and
// q3_swiglu, 150 against 181 at 8,192, 41.5 against 52.8 at 2,048 and 28.0
// against 28.6 at 1,024; alone it was even or ahead down to 129 rows, but a
// batch-256 decode step (a CUDA graph, where cuBLASLt's kernel overlaps its
// neighbours differently) took 4.653-4.661 ms through it against
// 4.625-4.626, so decode steps keep cuBLASLt.
// docs/cuda.md has the design and what it took to get there. The lab's
// ROSEINFER_CUDA_FORCE=nogemmws keeps cuBLASLt and q3_swiglu for A/Bs.

const (
	q3GemmWSFile    = "q3_gemm_ws.cu"
	q3GemmWSSwiGLU  = "q3_gemm_ws_swiglu"
	q3GemmWSOut     = "q3_gemm_ws_out"
	q3GemmWSTileM   = 128                                       // WS_BM
	q3GemmWSTileN   = 256                                       // WS_BN
	q3GemmWSWBox    = 128                                       // WS_WBOX_ROWS: weight rows a TMA box
	q3GemmWSSmem    = 4*(128*64*2+256*64*2) + 2*64*128*2 + 1024 // WS_SMEM: four stages, two consumers' SwiGLU outputs
	q3GemmWSBlock   = 384                                       // three warpgroups
	q3GemmWSMinRows = 1024                                      // prompt steps: decode steps of 256 rows lost 0.7% through it
	// q3GemmWSGroup is the row tiles a group of the tile order (ws_tile):
	// 132 blocks at work cover 16 row tiles (4 MB of x) and about 8 weight
	// tiles (4 MB) instead of all of x (33.5 MB at 16,384 rows).
	q3GemmWSGroup = 16
	// q3GemmWSCluster is the blocks a cluster, which share each weight tile
	// by TMA multicast (at 16,384 rows 295 us against 296 without).
	q3GemmWSCluster = 2
)

var q3GemmWSKernels = []string{q3GemmWSSwiGLU, q3GemmWSOut}

// q3GemmWS launches name over rows x N (K deep): a persistent grid of at
// most a block an SM; xMap and wMap are tensor maps of x (boxes of
// q3GemmWSTileM rows) and W (boxes of q3GemmWSWBox rows), passed by value.
func (g *gpu) q3GemmWS(name string, out devPtr, xMap, wMap uintptr, rows, K, N, group, cluster int) error {
	if K%wgTileK != 0 || N%q3GemmWSTileN != 0 || rows <= 0 || cluster < 1 || cluster > 2 {
		return fmt.Errorf("cuda: %s takes K a multiple of %d, N of %d and clusters of 1 or 2, got %d x %d x %d, cluster %d",
			name, wgTileK, q3GemmWSTileN, rows, K, N, cluster)
	}
	// A cluster takes cluster row tiles of one column tile at a time.
	tiles := ceilDiv(ceilDiv(rows, q3GemmWSTileM), cluster) * (N / q3GemmWSTileN)
	grid := cluster * min(tiles, g.smCount/cluster)
	return g.launchClusterRefs(g.kernel(name), 1, grid, 1, cluster, q3GemmWSBlock, q3GemmWSSmem,
		[]uintptr{xMap, wMap}, argPtr(out), argInt(rows), argInt(K), argInt(N), argInt(group))
}

// resolveRotaryGemmWS builds the tensor maps q3_gemm_ws.cu's gate|up
// takes, where its kernels were built (sm_90a) and the lab left it on.
func (d *Device) resolveRotaryGemmWS() error {
	q, g := d.q3, d.g
	if d.opts.force.noGemmWS || q.f32 || g.drv.cuTensorMapEncodeTiled == 0 || d.cfg.Channels%wgTileK != 0 || (2*q.I)%q3GemmWSTileN != 0 ||
		d.opts.MaxStepTokens < q3GemmWSMinRows {
		return nil
	}
	for _, name := range q3GemmWSKernels {
		k, ok := g.kernels[name]
		if !ok {
			return nil
		}
		if err := g.setMaxDynamicSmem(k, q3GemmWSSmem); err != nil {
			return err
		}
	}
	mats := []tmaMatrix{{q.act.norm, d.opts.MaxStepTokens, d.cfg.Channels, q3GemmWSTileM}}
	for _, l := range q.w.layers {
		mats = append(mats, tmaMatrix{l.gateUp, 2 * q.I, d.cfg.Channels, q3GemmWSWBox})
	}
	tma, err := g.encodeTensorMaps(mats)
	if err != nil {
		return err
	}
	q.ws = tma
	return nil
}

// gateUpSwiGLU enqueues gate|up with SwiGLU into q.act.hidden through
// q3_gemm_ws.cu, reporting false where the step does not take it (fewer
// rows than q3GemmWSMinRows, or the kernel is off).
func (s *rotaryStep) gateUpSwiGLU(w *rotaryLayer) bool {
	q, f := s.q, s.d.opts.force
	if s.err != nil || q.ws.maps == nil || s.N < cmp.Or(f.gemmWSMinRows, q3GemmWSMinRows) {
		return false
	}
	xMap, okX := q.ws.maps[q.act.norm]
	wMap, okW := q.ws.maps[w.gateUp]
	if !okX || !okW {
		return false
	}
	group := q3GemmWSGroup
	if f.gemmWSGroup != 0 {
		group = max(f.gemmWSGroup, 0)
	}
	s.end("ws_gate_up_swiglu", s.d.g.q3GemmWS(q3GemmWSSwiGLU, q.act.hidden, xMap, wMap, s.N, s.d.cfg.Channels, 2*q.I, group,
		cmp.Or(f.gemmWSCluster, q3GemmWSCluster)))
	q.wsLaunches++
	return true
}
