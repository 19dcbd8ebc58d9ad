package cuda

import "fmt"

// q3_wg.cu: the rotary block's projections at up to rotaryWGRows token rows
// on Hopper, through wg.cuh's TMA + warpgroup MMA kernel in bf16 (the
// file's header says why not cuBLASLt there).

const (
	q3WGFile  = "q3_wg.cu"
	q3WGMaxKT = 16 // WG_MAX_KT in q3_wg.cu: k tiles a block holds, so one slice has K <= 1024

	// q3WGStaticSmem is the kernels' static shared memory (a mbarrier a k
	// tile), which their dynamic shared memory must leave room for.
	q3WGStaticSmem = 8 * q3WGMaxKT

	// rotaryWGRows is the most token rows a step sends through q3_wg.cu;
	// larger steps take cuBLASLt (each 64-row tile re-reads every weight).
	// Above rotaryWGOneSliceRows rows, q|k|v and gate|up (one K slice, two
	// row tiles) go back to cuBLASLt: on the H100 at 128 rows they took
	// 14.7 and 17.7 us a launch against cuBLASLt's 9.1 and 10.5 (+4.7 for
	// the SwiGLU kernel), while o_proj and down_proj, split over K, took
	// 8.5 and 9.7 against 9.0 and 10.7 (docs/cuda.md).
	rotaryWGRows         = 128
	rotaryWGOneSliceRows = 64

	// wg.cuh's bf16 epilogues (and mma.cuh's residual one, gemvResidual).
	wgOutBF16    = 6 // WG_OUT_BF16
	wgSwiGLUBF16 = 7 // WG_SWIGLU_BF16
)

// q3WGTilesN are q3_wg.cu's tile widths, widest first.
var q3WGTilesN = []int{64, 48, 32, 16}

func q3WGKernelName(bn int, split bool) string {
	if split {
		return fmt.Sprintf("q3_wg_sk_n%d", bn)
	}
	return fmt.Sprintf("q3_wg_n%d", bn)
}

// q3WGKernelNames are every kernel of q3_wg.cu.
func q3WGKernelNames() []string {
	var names []string
	for _, split := range []bool{false, true} {
		for _, bn := range q3WGTilesN {
			names = append(names, q3WGKernelName(bn, split))
		}
	}
	return names
}

// rotaryWG is the rotary block's q3_wg.cu state: whether steps use it, the
// tensor maps of the projection inputs (every row of the buffers) and of
// each layer's weights, in C memory, keyed by the matrix's address.
type rotaryWG struct {
	ok  bool
	tma wgMaps
}

// q3WGShape is a projection's launch through q3_wg.cu: its column tile
// width and how many slices K is split into (only the residual epilogue,
// whose slices add into the fp32 output, splits), ok false where none
// fits. One slice: the widest tile whose k tiles fit shared memory (the
// fewest re-reads of x). Split: the widest tile that divides oc, then the
// most slices that keep the grid within one block an SM (more weight bytes
// in flight at once), each of at most q3WGMaxKT k tiles. smem is the
// dynamic shared memory a block may have.
func q3WGShape(smCount, smem, rows, K, oc int, residual bool) (bn, splits int, ok bool) {
	if rows <= 0 || K <= 0 || K%wgTileK != 0 {
		return 0, 0, false
	}
	kt, mt := K/wgTileK, ceilDiv(rows, wgTileM)
	for _, bn := range q3WGTilesN {
		if oc%bn != 0 {
			continue
		}
		if !residual {
			if kt <= q3WGMaxKT && wgSmem(bn, K) <= smem {
				return bn, 1, true
			}
			continue
		}
		best := 0
		for s := 1; s <= kt; s++ {
			if kt%s != 0 || kt/s > q3WGMaxKT || wgSmem(bn, K/s) > smem {
				continue
			}
			if best == 0 || mt*(oc/bn)*s <= smCount {
				best = s
			}
		}
		if best > 0 {
			return bn, best, true
		}
	}
	return 0, 0, false
}

// resolveRotaryWG enables q3_wg.cu where its kernels were built (sm_90a),
// the driver encodes tensor maps and the model's projections fit it, and
// builds the tensor maps.
func (d *Device) resolveRotaryWG() error {
	q, g := d.q3, d.g
	q.wg = rotaryWG{}
	if d.opts.force.cuBLASLt || d.opts.force.noRotaryWG || g.drv.cuTensorMapEncodeTiled == 0 {
		return nil
	}
	C, A := d.cfg.Channels, q.NH*q.HD
	for _, p := range []struct {
		K, oc    int
		residual bool
	}{{C, q.qkvWidth, false}, {A, C, true}, {C, 2 * q.I, false}, {q.I, C, true}} {
		if _, _, ok := q3WGShape(g.smCount, g.smemOptIn-q3WGStaticSmem, rotaryWGRows, p.K, p.oc, p.residual); !ok {
			return nil
		}
	}
	for _, name := range q3WGKernelNames() {
		k, ok := g.kernels[name]
		if !ok {
			return nil
		}
		if err := g.setMaxDynamicSmem(k, g.smemOptIn-q3WGStaticSmem); err != nil {
			return err
		}
	}
	N := d.opts.MaxStepTokens
	mats := []tmaMatrix{{q.act.norm, N, C, wgTileM}, {q.act.att, N, A, wgTileM}, {q.act.hidden, N, q.I, wgTileM}}
	for _, l := range q.w.layers {
		mats = append(mats, tmaMatrix{l.qkv, q.qkvWidth, C, wgWeightBoxRows}, tmaMatrix{l.o, C, A, wgWeightBoxRows},
			tmaMatrix{l.gateUp, 2 * q.I, C, wgWeightBoxRows}, tmaMatrix{l.down, C, q.I, wgWeightBoxRows})
	}
	// bf16 through fp16's maps: the TMA moves 2-byte elements either way,
	// and its zero fill is the same bits.
	tma, err := g.encodeTensorMaps(mats)
	if err != nil {
		return err
	}
	q.wg = rotaryWG{ok: true, tma: tma}
	return nil
}

// freeRotaryWG releases the tensor maps' C memory.
func (q *rotaryState) freeRotaryWG() {
	q.wg.tma.free()
	q.wg = rotaryWG{}
}

// useWG reports whether a step of rows token rows takes its projections
// through q3_wg.cu (steps q3_gemv.cu takes stay there).
//
// A step's last 64-row tile may reach past the MaxStepTokens rows the x
// maps cover: the TMA reads those rows as zeros (TestQ3Wgmma's maps end at
// the last row), and the epilogue stores only real rows. So every step of
// up to rotaryWGRows rows takes it, as prewarmRotaryGEMMs assumes when it
// plans no cuBLASLt GEMM for them.
func (s *rotaryStep) useWG(rows int) bool {
	return s.q.wg.ok && rows <= rotaryWGRows && !s.useGemv(rows)
}

// wgGemm: out = inp (N, K) @ w^T through q3_wg.cu with the epilogue mode
// (out's rows ldo elements apart), in clusters of the force option's size
// (none by default).
func (s *rotaryStep) wgGemm(name string, out devPtr, ldo int, inp, w devPtr, K, oc, mode int) {
	if s.err != nil {
		return
	}
	g := s.d.g
	bn, splits, ok := q3WGShape(g.smCount, g.smemOptIn-q3WGStaticSmem, s.N, K, oc, mode == gemvResidual)
	xMap, okX := s.q.wg.tma.maps[inp]
	wMap, okW := s.q.wg.tma.maps[w]
	if !ok || !okX || !okW {
		s.end(name, fmt.Errorf("cuda: %s has no q3_wg.cu launch for %d rows, K %d, %d columns", name, s.N, K, oc))
		return
	}
	cluster := 1
	if c := s.d.opts.force.rotaryWGCluster; c > 1 && (oc/bn)%c == 0 {
		cluster = c
	}
	s.end(name, g.q3WGGemm(bn, splits, cluster, out, ldo, xMap, wMap, s.N, K, oc, mode))
}

// q3WGGemm launches q3_wg.cu's kernel of tile width bn over rows x oc with
// K in splits slices (each a multiple of 64 of at most q3WGMaxKT k tiles),
// in clusters of cluster column tiles; xMap and wMap are the C addresses of
// tensor maps of x (boxes of 64 rows) and W (boxes of wgWeightBoxRows
// rows), passed by value.
func (g *gpu) q3WGGemm(bn, splits, cluster int, out devPtr, ldo int, xMap, wMap uintptr, rows, K, oc, mode int) error {
	return g.launchClusterRefs(g.kernel(q3WGKernelName(bn, splits > 1)), ceilDiv(rows, wgTileM), oc/bn, splits, cluster, 128,
		wgSmem(bn, K/splits), []uintptr{xMap, wMap}, argPtr(out), argInt(ldo), argPtr(0), argPtr(0),
		argInt(rows), argInt(K/splits), argInt(oc), argInt(mode), argPtr(0), argPtr(0), argPtr(0), argF32(0))
}

// rotaryOneSliceRows is the most rows whose q|k|v and gate|up take
// q3_wg.cu (useWG's steps take o_proj and down_proj): rotaryWGOneSliceRows
// unless the lab forces another limit.
func (d *Device) rotaryOneSliceRows() int {
	if n := d.opts.force.rotaryWGOneSliceRows; n > 0 {
		return n
	}
	return rotaryWGOneSliceRows
}

// layersWG enqueues the layers of a step useWG takes: RMSNorm kernels
// between the projections, o_proj and down_proj through q3_wg.cu, q|k|v
// and gate|up (SwiGLU in its epilogue) too up to rotaryOneSliceRows, else
// through cuBLASLt and the SwiGLU kernel.
func (s *rotaryStep) layersWG() {
	d, q, C, A := s.d, s.q, s.d.cfg.Channels, s.q.NH*s.q.HD
	oneSlice := s.N <= d.rotaryOneSliceRows()
	for l := range q.w.layers {
		w := &q.w.layers[l]
		s.rmsnorm("rmsnorm_1", q.act.norm, 0, w.ln1, s.N)
		switch {
		case oneSlice:
			s.wgGemm("wg_qkv", q.act.qkv, q.qkvWidth, q.act.norm, w.qkv, C, q.qkvWidth, wgOutBF16)
			s.qkRopeKV(l, w)
		case s.qkvRopeKV(l, w): // only where the lab lowers q3_gemm_ws.cu's threshold
		default:
			s.gemm("gemm_qkv", q.act.qkv, dataR16BF, q.act.norm, w.qkv, C, q.qkvWidth, false)
			s.qkRopeKV(l, w)
		}
		s.attention(l, w)
		s.wgGemm("wg_o", d.act.residual, C, q.act.att, w.o, A, C, gemvResidual)
		s.rmsnorm("rmsnorm_2", q.act.norm, 0, w.ln2, s.N)
		switch {
		case oneSlice:
			s.wgGemm("wg_gate_up_swiglu", q.act.hidden, q.I, q.act.norm, w.gateUp, C, 2*q.I, wgSwiGLUBF16)
		case s.gateUpSwiGLU(w):
		default:
			s.gemm("gemm_gate_up", q.act.gateUp, dataR16BF, q.act.norm, w.gateUp, C, 2*q.I, false)
			s.swiglu()
		}
		s.prefetchKV(l + 1)
		s.wgGemm("wg_down", d.act.residual, C, q.act.hidden, w.down, q.I, C, gemvResidual)
	}
}
