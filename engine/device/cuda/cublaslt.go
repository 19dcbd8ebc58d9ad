package cuda

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
)

// cuBLASLt constants (cublasLt.h, library_types.h).
const (
	computeType32F = 68 // CUBLAS_COMPUTE_32F: fp32 accumulate
	dataR32F       = 0  // CUDA_R_32F
	dataR16F       = 2  // CUDA_R_16F
	dataR16BF      = 14 // CUDA_R_16BF

	opN = 0
	opT = 1

	descAttrTransA     = 3
	descAttrTransB     = 4
	descAttrEpilogue   = 7
	descAttrBiasPtr    = 8
	layoutAttrType     = 0
	prefAttrMaxWSBytes = 1

	epilogueDefault  = 1
	epilogueBias     = 4
	epilogueGeluBias = 36 // GELU (tanh approximation, GPT-2's gelu_new) after the bias

	heuristicResultBytes = 96 // algo [8]uint64, size_t workspace, int32 state, float waves, int32[4]
	gemmWorkspaceBytes   = 32 << 20
)

// blasLt is the cuBLASLt handle plus one plan (descriptors + the algorithm
// the heuristic chose) per GEMM shape, so the heuristic runs once per shape
// instead of on every call (cublasLtMatmul with algo=NULL spends ~14 µs of
// host time re-running it).
type blasLt struct {
	drv    *driver
	handle uintptr
	ws     devPtr
	arena  *cArena // alpha/beta scalars and algo blobs: stable C memory

	create, destroy, matmul                    uintptr
	descCreate, descDestroy, descSet           uintptr
	layoutCreate, layoutDestroy                uintptr
	prefCreate, prefDestroy, prefSet, heuristc uintptr

	one, zero uintptr // float32 1 and 0 in the arena
	plans     map[gemmKey]*gemmPlan

	// scratch receives the trial outputs of accumulating GEMMs while their
	// algorithm is tuned (a trial must not add into the residual stream).
	scratch      devPtr
	scratchBytes int
	noTune       bool

	// Plans built so far, how many of them timed candidates, and the host
	// time spent building them (heuristic, trials and the trials' wait):
	// the device's stats show what the serving path paid after prewarm.
	plansBuilt, plansTuned int
	planTime               time.Duration
}

// maxTuneAlgos is how many of the heuristic's candidates are timed per shape,
// at every row count: the heuristic's first choice is not the fastest for
// the skinny GEMMs of a decode step, nor for the large ones of a prefill step
// (Qwen3-0.6B's q|k|v, gate|up and o_proj at 16,384 rows: 9-12% faster
// timed, docs/cuda.md). Row counts are rounded up to a fixed set of buckets
// (gemmRows) and every bucket is planned and tuned when the device starts
// (prewarm), never on the serving path: a trial synchronises the stream and
// loads each candidate's kernel module.
const maxTuneAlgos = 16

// gemmKey is everything the chosen algorithm depends on.
type gemmKey struct {
	n, k, oc, ldd  int
	epilogue       int
	inType         int // of both operands
	outType        int
	accumulate     bool
	alignedBiasPtr bool
}

type gemmPlan struct {
	desc, a, b, d uintptr
	algo          uintptr // pointer into the arena
}

func loadBlasLt(drv *driver) (*blasLt, error) {
	lib, err := openLibrary("libcublasLt (cuBLASLt)",
		[]string{"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11", "libcublasLt.so"}, false)
	if err != nil {
		return nil, err
	}
	b := &blasLt{drv: drv, plans: map[gemmKey]*gemmPlan{}}
	err = lib.symbols(map[*uintptr][]string{
		&b.create:        {"cublasLtCreate"},
		&b.destroy:       {"cublasLtDestroy"},
		&b.matmul:        {"cublasLtMatmul"},
		&b.descCreate:    {"cublasLtMatmulDescCreate"},
		&b.descDestroy:   {"cublasLtMatmulDescDestroy"},
		&b.descSet:       {"cublasLtMatmulDescSetAttribute"},
		&b.layoutCreate:  {"cublasLtMatrixLayoutCreate"},
		&b.layoutDestroy: {"cublasLtMatrixLayoutDestroy"},
		&b.prefCreate:    {"cublasLtMatmulPreferenceCreate"},
		&b.prefDestroy:   {"cublasLtMatmulPreferenceDestroy"},
		&b.prefSet:       {"cublasLtMatmulPreferenceSetAttribute"},
		&b.heuristc:      {"cublasLtMatmulAlgoGetHeuristic"},
	})
	if err != nil {
		return nil, err
	}
	if b.arena, err = newCArena(8 << 20); err != nil { // ~80k plans; pages are touched only when used
		return nil, err
	}
	if err := b.status("cublasLtCreate", b.call(b.create, uintptr(unsafe.Pointer(&b.handle)))); err != nil {
		return nil, err
	}
	p, _ := b.arena.alloc(8)
	*(*float32)(p) = 1
	b.one = uintptr(p)
	p, _ = b.arena.alloc(8)
	*(*float32)(p) = 0
	b.zero = uintptr(p)
	if b.ws, err = drv.memAlloc(gemmWorkspaceBytes); err != nil {
		return nil, err
	}
	return b, nil
}

// call: see driver.call for why go:uintptrescapes.
//
//go:uintptrescapes
func (b *blasLt) call(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}

func (b *blasLt) status(what string, r uintptr) error {
	if int32(r) != 0 {
		return fmt.Errorf("cuda: %s: cublasStatus %d", what, int32(r))
	}
	return nil
}

func (b *blasLt) setDesc(desc uintptr, attr int, v int32) error {
	return b.status("cublasLtMatmulDescSetAttribute", b.call(b.descSet, desc, uintptr(attr), uintptr(unsafe.Pointer(&v)), 4))
}

// plan returns the cached plan for key, building descriptors and asking the
// heuristic on first use; with several candidates it times each once on the
// call's own operands and keeps the fastest (the heuristic's first choice is
// often not the fastest for the skinny GEMMs of a decode step).
func (b *blasLt) plan(key gemmKey, bias devPtr, stream uintptr, out, inp, w devPtr) (*gemmPlan, error) {
	if p, ok := b.plans[key]; ok {
		return p, nil
	}
	start := time.Now()
	defer func() { b.planTime += time.Since(start) }()
	p := &gemmPlan{}
	if err := b.status("cublasLtMatmulDescCreate", b.call(b.descCreate, uintptr(unsafe.Pointer(&p.desc)), computeType32F, dataR32F)); err != nil {
		return nil, err
	}
	if err := b.setDesc(p.desc, descAttrTransA, opT); err != nil {
		return nil, err
	}
	if err := b.setDesc(p.desc, descAttrTransB, opN); err != nil {
		return nil, err
	}
	if err := b.setDesc(p.desc, descAttrEpilogue, int32(key.epilogue)); err != nil {
		return nil, err
	}
	if key.epilogue != epilogueDefault {
		bp := uintptr(bias)
		if err := b.status("set bias", b.call(b.descSet, p.desc, descAttrBiasPtr, uintptr(unsafe.Pointer(&bp)), 8)); err != nil {
			return nil, err
		}
	}
	// Column-major view of row-major tensors: D(oc x n) = W(k x oc)^T * X(k x n).
	mk := func(dst *uintptr, typ, rows, cols, ld int) error {
		return b.status("cublasLtMatrixLayoutCreate", b.call(b.layoutCreate, uintptr(unsafe.Pointer(dst)), uintptr(typ), uintptr(rows), uintptr(cols), uintptr(ld)))
	}
	if err := mk(&p.a, key.inType, key.k, key.oc, key.k); err != nil {
		return nil, err
	}
	if err := mk(&p.b, key.inType, key.k, key.n, key.k); err != nil {
		return nil, err
	}
	if err := mk(&p.d, key.outType, key.oc, key.n, key.ldd); err != nil {
		return nil, err
	}
	var pref uintptr
	if err := b.status("cublasLtMatmulPreferenceCreate", b.call(b.prefCreate, uintptr(unsafe.Pointer(&pref)))); err != nil {
		return nil, err
	}
	defer b.call(b.prefDestroy, pref)
	ws := uint64(gemmWorkspaceBytes)
	if err := b.status("set workspace", b.call(b.prefSet, pref, prefAttrMaxWSBytes, uintptr(unsafe.Pointer(&ws)), 8)); err != nil {
		return nil, err
	}
	res, err := b.arena.alloc(maxTuneAlgos * heuristicResultBytes)
	if err != nil {
		return nil, err
	}
	var count int32
	r := b.call(b.heuristc, b.handle, p.desc, p.a, p.b, p.d, p.d, pref, maxTuneAlgos, uintptr(res), uintptr(unsafe.Pointer(&count)))
	if err := b.status("cublasLtMatmulAlgoGetHeuristic", r); err != nil || count == 0 {
		return nil, fmt.Errorf("cuda: cuBLASLt has no algorithm for n=%d k=%d oc=%d epilogue=%d in=%d out=%d: %v", key.n, key.k, key.oc, key.epilogue, key.inType, key.outType, err)
	}
	p.algo = uintptr(res) // the first 64 bytes of a result are the algo
	if count > 1 && !b.noTune {
		elem := 2
		if key.outType == dataR32F {
			elem = 4
		}
		dst := out
		if key.accumulate {
			dst = b.scratch
			if key.ldd*key.n*elem > b.scratchBytes {
				dst = 0
			}
		}
		if dst != 0 {
			b.plansTuned++
			best := -1.0
			for i := 0; i < int(count); i++ {
				algo := uintptr(res) + uintptr(i*heuristicResultBytes)
				ms, err := b.timeAlgo(p, algo, stream, dst, out, inp, w, key.accumulate)
				if err == nil && (best < 0 || ms < best) {
					best, p.algo = ms, algo
				}
			}
		}
	}
	b.plans[key] = p
	b.plansBuilt++
	return p, nil
}

// timeAlgo runs one candidate algorithm once to warm up, then three times
// between events, and returns the mean time in ms.
func (b *blasLt) timeAlgo(p *gemmPlan, algo, stream uintptr, dst, c, inp, w devPtr, accumulate bool) (float64, error) {
	beta := b.zero
	if accumulate {
		beta = b.one
	}
	run := func() error {
		r, _, _ := purego.SyscallN(b.matmul, b.handle, p.desc, b.one, uintptr(w), p.a, uintptr(inp), p.b, beta,
			uintptr(c), p.d, uintptr(dst), p.d, algo, uintptr(b.ws), gemmWorkspaceBytes, stream)
		return b.status("cublasLtMatmul (tuning)", r)
	}
	if err := run(); err != nil {
		return 0, err
	}
	start, err := b.drv.eventCreate(0)
	if err != nil {
		return 0, err
	}
	defer purego.SyscallN(b.drv.cuEventDestroy, start)
	end, err := b.drv.eventCreate(0)
	if err != nil {
		return 0, err
	}
	defer purego.SyscallN(b.drv.cuEventDestroy, end)
	if err := b.drv.eventRecord(start, stream); err != nil {
		return 0, err
	}
	for i := 0; i < 3; i++ {
		if err := run(); err != nil {
			return 0, err
		}
	}
	if err := b.drv.eventRecord(end, stream); err != nil {
		return 0, err
	}
	if err := b.drv.eventSync(end); err != nil {
		return 0, err
	}
	ms, err := b.drv.eventElapsedMs(start, end)
	return float64(ms) / 3, err
}

// gemm computes out(n, oc) = inp(n, k) @ w(oc, k)^T [+ bias(oc)] [gelu] [+ out],
// all row-major; inp and w fp16, out fp16 or fp32 (outType), fp32 accumulate.
// accumulate adds the existing out (beta = 1): the residual add, fused.
func (b *blasLt) gemm(stream uintptr, out devPtr, outType, ldd int, inp, w, bias devPtr, n, k, oc, epilogue int, accumulate bool) error {
	return b.gemmTyped(stream, out, outType, ldd, inp, w, dataR16F, bias, n, k, oc, epilogue, accumulate)
}

// gemmTyped is gemm with operands of inType (fp16 or bf16; out bf16 or
// fp32 with bf16 operands, as cuBLASLt pairs them).
func (b *blasLt) gemmTyped(stream uintptr, out devPtr, outType, ldd int, inp, w devPtr, inType int, bias devPtr, n, k, oc, epilogue int, accumulate bool) error {
	if n == 0 {
		return nil
	}
	key := gemmKey{n: n, k: k, oc: oc, ldd: ldd, epilogue: epilogue, inType: inType, outType: outType, accumulate: accumulate, alignedBiasPtr: bias%16 == 0}
	p, err := b.plan(key, bias, stream, out, inp, w)
	if err != nil {
		return err
	}
	if epilogue != epilogueDefault {
		bp := uintptr(bias)
		if err := b.status("set bias", b.call(b.descSet, p.desc, descAttrBiasPtr, uintptr(unsafe.Pointer(&bp)), 8)); err != nil {
			return err
		}
	}
	beta := b.zero
	if accumulate {
		beta = b.one
	}
	r, _, _ := purego.SyscallN(b.matmul, b.handle, p.desc, b.one, uintptr(w), p.a, uintptr(inp), p.b, beta,
		uintptr(out), p.d, uintptr(out), p.d, p.algo, uintptr(b.ws), gemmWorkspaceBytes, stream)
	if int32(r) != 0 { // formatted only on failure: a step makes ~50 of these calls
		return b.status(fmt.Sprintf("cublasLtMatmul(n=%d k=%d oc=%d)", n, k, oc), r)
	}
	return nil
}

func (b *blasLt) close() {
	for _, p := range b.plans {
		b.call(b.layoutDestroy, p.a)
		b.call(b.layoutDestroy, p.b)
		b.call(b.layoutDestroy, p.d)
		b.call(b.descDestroy, p.desc)
	}
	b.plans = nil
	if b.handle != 0 {
		b.call(b.destroy, b.handle)
		b.handle = 0
	}
	b.drv.memFree(b.ws)
	b.ws = 0
	if b.arena != nil {
		b.arena.free()
		b.arena = nil
	}
}
