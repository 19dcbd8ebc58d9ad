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
// The same kernel takes q|k|v with q3_qk_rope_kv's work in its epilogue
// (q3_gemm_ws_qkv) in the same steps: 252 us at 16,384 x 1,024 x 4,096 on
// the H100 against 272 for cuBLASLt's GEMM and q3_qk_rope_kv.
// docs/cuda.md has the design and what it took to get there. The lab's
// ROSEINFER_CUDA_FORCE=nogemmws keeps cuBLASLt, q3_swiglu and
// q3_qk_rope_kv for A/Bs, nogemmwsqkv the last two for q|k|v only.

const (
	q3GemmWSFile    = "q3_gemm_ws.cu"
	q3GemmWSSwiGLU  = "q3_gemm_ws_swiglu"
	q3GemmWSOut     = "q3_gemm_ws_out"
	q3GemmWSQKV     = "q3_gemm_ws_qkv"
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

var q3GemmWSKernels = []string{q3GemmWSSwiGLU, q3GemmWSOut, q3GemmWSQKV}

// q3GemmWS launches name over rows x N (K deep): a persistent grid of at
// most a block an SM; xMap and wMap are tensor maps of x (boxes of
// q3GemmWSTileM rows) and W (boxes of q3GemmWSWBox rows), passed by value;
// epilogue holds q3_gemm_ws_qkv's arguments past group (q3GemmWSQKVArgs).
func (g *gpu) q3GemmWS(name string, out devPtr, xMap, wMap uintptr, rows, K, N, group, cluster int, epilogue ...uint64) error {
	if K%wgTileK != 0 || N%q3GemmWSTileN != 0 || rows <= 0 || cluster < 1 || cluster > 2 {
		return fmt.Errorf("cuda: %s takes K a multiple of %d, N of %d and clusters of 1 or 2, got %d x %d x %d, cluster %d",
			name, wgTileK, q3GemmWSTileN, rows, K, N, cluster)
	}
	// A cluster takes cluster row tiles of one column tile at a time.
	tiles := ceilDiv(ceilDiv(rows, q3GemmWSTileM), cluster) * (N / q3GemmWSTileN)
	grid := cluster * min(tiles, g.smCount/cluster)
	return g.launchClusterRefs(g.kernel(name), 1, grid, 1, cluster, q3GemmWSBlock, q3GemmWSSmem,
		[]uintptr{xMap, wMap}, append([]uint64{argPtr(out), argInt(rows), argInt(K), argInt(N), argInt(group)}, epilogue...)...)
}

// q3GemmWSQKVArgs are q3_gemm_ws_qkv's arguments after the GEMM's.
func q3GemmWSQKVArgs(a ropeKV) []uint64 { return append(a.ptrArgs(), a.shapeArgs()...) }

// q3GemmWSQKVFits reports whether q3_gemm_ws_qkv's epilogue takes a
// block's q|k|v: 128-dim heads, an even number of query and of KV heads (a
// 256-column tile is two heads of one kind).
func q3GemmWSQKVFits(NH, NKV, HD int) bool { return HD == 128 && NH%2 == 0 && NKV%2 == 0 }

// resolveRotaryGemmWS builds the tensor maps q3_gemm_ws.cu's gate|up and
// q|k|v take, where its kernels were built (sm_90a) and the lab left them
// on.
func (d *Device) resolveRotaryGemmWS() error {
	q, g, f := d.q3, d.g, d.opts.force
	gateUp := (2*q.I)%q3GemmWSTileN == 0
	qkv := !f.noGemmWSQKV && q3GemmWSQKVFits(q.NH, q.NKV, q.HD)
	if f.noGemmWS || q.f32 || g.drv.cuTensorMapEncodeTiled == 0 || d.cfg.Channels%wgTileK != 0 || !(gateUp || qkv) ||
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
		if gateUp {
			mats = append(mats, tmaMatrix{l.gateUp, 2 * q.I, d.cfg.Channels, q3GemmWSWBox})
		}
		if qkv {
			mats = append(mats, tmaMatrix{l.qkv, q.qkvWidth, d.cfg.Channels, q3GemmWSWBox})
		}
	}
	tma, err := g.encodeTensorMaps(mats)
	if err != nil {
		return err
	}
	q.ws = tma
	return nil
}

// wsMaps are the tensor maps of the normalised rows and of w, where the
// step takes q3_gemm_ws.cu (at least q3GemmWSMinRows rows and the maps
// built), and the tile order's group.
func (s *rotaryStep) wsMaps(w devPtr) (xMap, wMap uintptr, group int, ok bool) {
	q, f := s.q, s.d.opts.force
	if s.err != nil || q.ws.maps == nil || s.N < cmp.Or(f.gemmWSMinRows, q3GemmWSMinRows) {
		return 0, 0, 0, false
	}
	xMap, okX := q.ws.maps[q.act.norm]
	wMap, okW := q.ws.maps[w]
	group = q3GemmWSGroup
	if f.gemmWSGroup != 0 {
		group = max(f.gemmWSGroup, 0)
	}
	return xMap, wMap, group, okX && okW
}

// gateUpSwiGLU enqueues gate|up with SwiGLU into q.act.hidden through
// q3_gemm_ws.cu, reporting false where the step does not take it (fewer
// rows than q3GemmWSMinRows, or the kernel is off).
func (s *rotaryStep) gateUpSwiGLU(w *rotaryLayer) bool {
	xMap, wMap, group, ok := s.wsMaps(w.gateUp)
	if !ok {
		return false
	}
	q := s.q
	s.end("ws_gate_up_swiglu", s.d.g.q3GemmWS(q3GemmWSSwiGLU, q.act.hidden, xMap, wMap, s.N, s.d.cfg.Channels, 2*q.I, group,
		cmp.Or(s.d.opts.force.gemmWSCluster, q3GemmWSCluster)))
	q.wsLaunches++
	return true
}

// qkvRopeKV enqueues q|k|v through q3_gemm_ws_qkv: the queries normalised
// and rotated into q.act.qkv, keys and values into layer l's cache, as
// cuBLASLt's q|k|v and qkRopeKV would leave them. It reports false where
// the step does not take it (as gateUpSwiGLU, or the attention rotates its
// rows itself).
func (s *rotaryStep) qkvRopeKV(l int, w *rotaryLayer) bool {
	if s.ropeInAttention {
		return false
	}
	xMap, wMap, group, ok := s.wsMaps(w.qkv)
	if !ok {
		return false
	}
	d, q := s.d, s.q
	s.end("ws_qkv_rope_kv", d.g.q3GemmWS(q3GemmWSQKV, q.act.qkv, xMap, wMap, s.N, d.cfg.Channels, q.qkvWidth, group,
		cmp.Or(d.opts.force.gemmWSCluster, q3GemmWSCluster), q3GemmWSQKVArgs(s.ropeKV(l, w))...))
	q.wsQKVLaunches++
	return true
}
