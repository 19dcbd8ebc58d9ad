package cuda

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/roseinfer/roseinfer/engine/device"
	"github.com/roseinfer/roseinfer/engine/model"
	"github.com/roseinfer/roseinfer/engine/model/arch"
)

// Options tune the device. The zero value is valid: DefaultOptions' values
// fill any field left zero.
type Options struct {
	// NoCUDAGraph runs decode steps eagerly (kernel by kernel) instead of
	// replaying a captured graph: the --no-cuda-graph ablation.
	NoCUDAGraph bool
	// MaxStepTokens is the largest Batch.NumTokens the device accepts;
	// activations are sized for it.
	MaxStepTokens int
	// MaxSeqs is the largest len(Batch.Seqs).
	MaxSeqs int
	// GraphBatchSizes are the decode batch sizes captured as CUDA graphs; a
	// decode step is padded to the next one (larger steps run eagerly).
	GraphBatchSizes []int
	// GPUMemoryUtilization is the fraction of the GPU's memory this process
	// may use (weights + activations + KV cache) when New is given
	// KVConfig.NumBlocks <= 0, whatever other processes hold (vLLM's
	// meaning: kvPoolBlocks); KVConfig() then reports the blocks chosen.
	GPUMemoryUtilization float64
	// ChunkRows: a step whose sequences each bring at most this many tokens
	// (decode steps, and the short uncached tail of a prompt whose prefix is
	// cached, alone or beside decodes) runs as one-token rows through the
	// decode attention kernels and, padded like a decode step, a captured
	// graph, instead of eagerly with the prefill kernels. 0 = the default
	// (16), negative = only one-token sequences (--cuda-chunk-rows).
	ChunkRows int
	// Float32 runs the rotary block (Qwen3) in fp32: weights, activations
	// and KV cache, cuBLASLt's fp32 GEMMs and q3_f32.cu's kernels (serve
	// --dtype float32). It is several times slower than the bf16 path and
	// exists to check the engine against an fp32 reference. GPT-2 runs in
	// fp16 only.
	Float32 bool

	// force makes the device take fallback paths it otherwise takes only on
	// other GPUs, drivers or model shapes, so that the tests cover them on
	// one H100. Only the package's tests set it.
	force forcedPaths
}

// forcedPaths are the fallbacks a test can force (doc.go lists when each is
// taken for real).
type forcedPaths struct {
	cuBLASLt             bool // LayerNorm kernels and cuBLASLt for every projection and the LM head (no gemv.cu, gemm_skinny.cu, gemm_wg.cu)
	blockDecode          bool // the block-per-(sequence, head) decode attention kernel
	simplePrefill        bool // the CUDA-core prefill attention kernel
	gemvLMHead           bool // the small-step LM head through gemv.cu, the sampler scanning whole rows (no lmhead.cu)
	noPair               bool // the folded attproj and fc as two gemm_wg.cu grids (no gemm_wg_pair)
	noPDL                bool // launches without programmatic dependent launch
	rowsBlocks           int  // q3_attn_rows' blocks an SM that rotarySplits fills (0: its residency)
	noRotaryWG           bool // the rotary block's projections at 17-128 rows through cuBLASLt (no q3_wg.cu)
	rotaryWGCluster      int  // q3_wg.cu's launches in clusters of this many column tiles sharing x (0, 1: none)
	rotaryWGOneSliceRows int  // the most rows whose q|k|v and gate|up take q3_wg.cu (0: rotaryWGOneSliceRows)
	noRopeInAttention    bool // q3_qk_rope_kv in every step (no q3_attn_rows_rope)
	noPrefillWG          bool // the prompt chunks' attention through q3_attn_prefill (no q3_attn_wg.cu)
	ropeInAttentionRows  int  // the most rows of a decode-only step that take q3_attn_rows_rope (0: ropeFoldMaxRows)
	decodeInBatchOrder   bool // the rotary block's decode rows attended in the batch's order, not longest context first
	kvPrefetchMB         int  // the KV prefetch's budget a layer in MiB (0: kvPrefetchMB; negative: no prefetch)
	kvPrefetchAnyRows    bool // every decode-only step prefetches, whatever its rows
	rotaryFP32Logits     bool // the rotary block's cuBLASLt LM head writes fp32 logits (not bf16)
	normRowsMin          int  // q3_rmsnorm_rows takes steps of more than this many rows (0: rotaryNormRowsMin; negative: none)
	noGemmWS             bool // gate|up through cuBLASLt and q3_swiglu in every step (no q3_gemm_ws.cu)
	noGemmWSQKV          bool // q|k|v through cuBLASLt and q3_qk_rope_kv in every step (q3_gemm_ws.cu's gate|up kept)
	gemmWSMinRows        int  // the fewest rows whose gate|up takes q3_gemm_ws.cu (0: q3GemmWSMinRows)
	gemmWSGroup          int  // q3_gemm_ws.cu's row tiles a group of its tile order (0: q3GemmWSGroup; negative: column tile outermost)
	gemmWSCluster        int  // q3_gemm_ws.cu in clusters of this many blocks sharing each weight tile (0: q3GemmWSCluster)
}

// DefaultOptions are used for every zero field of Options.
var DefaultOptions = Options{
	MaxStepTokens:        8192,
	MaxSeqs:              256,
	GraphBatchSizes:      []int{1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256},
	GPUMemoryUtilization: 0.9,
	ChunkRows:            16,
}

// Which kernels take a step's projections, by its token rows: gemv.cu up
// to maxGemvRows, gemm_skinny.cu up to skinnyGemmRows, gemm_wg.cu up to
// wgGemmRows, cuBLASLt above (docs/cuda.md has the measurements).
const (
	skinnyGemmRows = 32  // on the H100 gemm_skinny.cu beats cuBLASLt at 24 and 32 rows and loses at 48 and above
	wgGemmRows     = 128 // on the H100 decode steps of batch 48-128 are 3-12% faster through gemm_wg.cu than cuBLASLt
)

// Device runs GPT-2 steps on one GPU. Methods are called from one goroutine
// at a time (the engine loop); each call locks that goroutine to its OS
// thread while it talks to the driver, since a CUDA context is per thread.
type Device struct {
	g    *gpu
	cfg  model.Config
	kv   device.KVConfig
	opts Options

	w           gpuWeights
	act         activations
	vocabPadded int // logits row stride (V rounded up to 128)
	cache       kvCache

	k      kernelSet  // the kernels forward launches
	path   pathChoice // which kernels take which steps
	tma    wgMaps     // gemm_wg.cu's tensor maps
	queue  stepQueue  // staging and the steps in flight (overlap)
	graphs graphCache // captured decode graphs
	instr  instrumentation
	q3     *rotaryState // the rotary block's weights, buffers and kernels (qwen3.go); nil for GPT-2's step
	closed bool

	freeAtOpen int // device memory free once the context was made, before this device allocated
}

// kvCache is the paged KV cache: one allocation holding every block.
type kvCache struct {
	base         devPtr
	layerBytes   int   // one layer's K (or V) of every block
	maxBlocks    int   // block table row length: ceil(maxT / B)
	scratchBlock int32 // one extra KV block that padding rows write into
}

// kernelSet are the kernels resolveKernels picked for the model.
type kernelSet struct {
	encoder, layerNorm, residualAdd, kvWrite, combine kernel
	decode, decodeSplits, decodeSplitsR4, prefill     kernel
	sample, sampleH                                   kernel          // sample_rows over fp32 logits, sample_rows_h over fp16 (halfLogits)
	gemv                                              [2][2][2]kernel // [layernorm][rows > 8][2 column tiles]
	lmHead                                            [2]kernel       // [rows > 8], lmhead.cu
}

// pathChoice is which kernels take which steps, decided once at New from
// the GPU, the driver and the model's shape (doc.go's Fallbacks), except
// noFusedResidual, which the first residual GEMM that cuBLASLt declines
// sets for good.
type pathChoice struct {
	prefillTile int  // query rows per prefill attention block (the kernel's BR)
	warpDecode  bool // the warp-per-(sequence, head) decode attention kernels (head size 64)
	gemvOK      bool // gemv.cu takes steps of up to maxGemvRows rows
	skinnyOK    bool // gemm_skinny.cu takes steps of up to skinnyRows rows
	lmheadOK    bool // lmhead.cu takes small steps' LM head
	wgOK        bool // gemm_wg.cu takes steps of up to wgRows rows
	wgPairOK    bool // gemm_wg_pair may run (every SM is this process's)

	skinnyRows, wgRows int           // skinnyGemmRows and wgGemmRows (cudabench's projection diagnostics move them)
	skinnyVariant      *skinnyKernel // nil: skinnyKernelFor (cudabench's projection diagnostics pick one)

	noFusedResidual, residualTried bool // cuBLASLt has no fp16-in/fp32-out residual GEMM: add it with residual_add
}

// wgMaps are the TMA descriptors gemm_wg.cu's launches pass: each
// matrix's, in C memory (buildWGMaps).
type wgMaps struct {
	maps  map[devPtr]uintptr
	arena *cArena
}

// free releases the maps' C memory and forgets them.
func (m *wgMaps) free() {
	if m.arena != nil {
		m.arena.free()
	}
	*m = wgMaps{}
}

// numStages is how many steps may be in flight at once.
const numStages = 2

// stepQueue holds the steps between Submit and Collect.
type stepQueue struct {
	stage   [numStages]staging // pinned host buffers, alternating so one step can be queued while another runs
	next    int                // stage the next Submit uses
	pending []int              // stages submitted and not yet collected, oldest first
	prevRow map[uint64]int     // each sequence's row in the last submitted step, for the on-GPU token hand-off
}

// graphCache holds the captured decode graphs.
type graphCache struct {
	byKey     map[graphKey]*decodeGraph
	retired   []decodeGraph // replaced graphs (retireGraphs), freed by dropGraphs
	capturing bool          // a decode graph is being captured on the stream
}

// instrumentation is what observes steps: the hook (hook.go; nil when
// nothing does), the GPU spans behind phase.SpanReporter (nil until first
// enabled) and what prewarm took, for the lab's statistics.
type instrumentation struct {
	hook          stepHook
	spans         *spanHook
	prewarmTook   time.Duration
	prewarmGraphs int
}

// labHooks are called by New once the device is ready: cudalab builds
// register the step statistics here (lab_stats.go). Empty in the product.
var labHooks []func(*Device) error

// labOptions are applied by New to its options before anything else:
// cudalab builds force paths from the environment here (lab_env.go), so one
// binary runs both sides of an A/B. Empty in the product.
var labOptions []func(*Options)

// staging is one step's pinned host memory: inputs going up, samples coming
// down, and the event that marks the samples as arrived. Each stage has its
// own device copy of the inputs, so a step's inputs can go up while the
// previous step (the other stage) still reads its own.
type staging struct {
	index  int // in stepQueue.stage
	in     []int32
	devIn  devPtr  // the inputs on the device, read by the step's kernels
	copied uintptr // event: devIn holds this step's inputs
	out    []int32 // (id, logprob bits) per sampled row, written by the sampler
	event  uintptr
	plan   stepPlan
	inPtr  unsafe.Pointer
	outPtr unsafe.Pointer // out's memory, mapped into the GPU's address space
	outDev devPtr         // outPtr's device address
}

// New uploads w (as fp16) to the GPU, allocates the KV cache (kv.NumBlocks
// blocks of kv.BlockSizeTokens tokens; <= 0 blocks = size from
// opts.GPUMemoryUtilization) and compiles or loads the kernels.
func New(w *model.Weights, kv device.KVConfig, opts Options) (*Device, error) {
	if w == nil {
		return nil, fmt.Errorf("cuda: nil weights")
	}
	if err := w.Config.Validate(); err != nil {
		return nil, err
	}
	if kv.BlockSizeTokens <= 0 {
		return nil, fmt.Errorf("cuda: KV block size %d must be positive", kv.BlockSizeTokens)
	}
	opts = withDefaults(opts)
	for _, force := range labOptions {
		force(&opts)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	g, err := openGPU()
	if err != nil {
		return nil, err
	}
	g.pdl = !opts.force.noPDL
	d := &Device{g: g, cfg: w.Config, kv: kv, opts: opts}
	if d.freeAtOpen, _, err = g.drv.memInfo(); err != nil {
		d.closeLocked()
		return nil, err
	}
	d.queue.prevRow = map[uint64]int{}
	d.graphs.byKey = map[graphKey]*decodeGraph{}
	if err := d.init(w); err != nil {
		d.closeLocked()
		return nil, err
	}
	if err := d.prewarm(); err != nil {
		d.closeLocked()
		return nil, err
	}
	for _, open := range labHooks {
		if err := open(d); err != nil {
			d.closeLocked()
			return nil, err
		}
	}
	return d, nil
}

func withDefaults(o Options) Options {
	def := DefaultOptions
	if o.MaxStepTokens <= 0 {
		o.MaxStepTokens = def.MaxStepTokens
	}
	if o.MaxSeqs <= 0 {
		o.MaxSeqs = def.MaxSeqs
	}
	if len(o.GraphBatchSizes) == 0 {
		o.GraphBatchSizes = def.GraphBatchSizes
	}
	if o.GPUMemoryUtilization <= 0 || o.GPUMemoryUtilization > 1 {
		o.GPUMemoryUtilization = def.GPUMemoryUtilization
	}
	if o.ChunkRows == 0 {
		o.ChunkRows = def.ChunkRows
	}
	if o.MaxSeqs > o.MaxStepTokens {
		o.MaxSeqs = o.MaxStepTokens
	}
	return o
}

func (d *Device) init(w *model.Weights) error {
	g, c := d.g, d.cfg
	f, err := arch.Lookup(c.Family)
	if err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	prog := f.Program(c)
	if d.opts.Float32 && !isRotary(prog) {
		return fmt.Errorf("cuda: --dtype float32 is implemented for the rotary block (Qwen3) only; the %s family runs in float16 (--dtype auto)", f.Title)
	}
	if isRotary(prog) {
		lr, err := lowerRotary(prog, c)
		if err != nil {
			return fmt.Errorf("cuda: the %s family: %w", f.Title, err)
		}
		return d.initRotary(w, lr)
	}
	if err := d.resolveKernels(); err != nil {
		return err
	}
	if d.w, err = uploadWeights(g, w); err != nil {
		return err
	}
	N, M, C := d.opts.MaxStepTokens, d.opts.MaxSeqs, c.Channels
	d.vocabPadded = paddedVocab(c.VocabSize)
	d.cache.maxBlocks = ceilDiv(c.MaxSeqLen, d.kv.BlockSizeTokens)
	maxTiles := ceilDiv(N, min(prefillTileRows, prefillTileRowsMMA)) + M // either prefill kernel
	inWords := newLayout(N, M, maxTiles, M, d.cache.maxBlocks).total
	for _, b := range []struct {
		p     *devPtr
		bytes int
	}{
		{&d.act.residual, 4 * N * C}, {&d.act.ln, 2 * N * C}, {&d.act.qkv, 2 * N * 3 * C}, {&d.act.attn, 2 * N * C},
		{&d.act.fc, 2 * N * 4 * C}, {&d.act.delta, 2 * N * C}, {&d.act.lnf, 2 * M * C}, {&d.act.logits, 4 * M * d.vocabPadded},
		{&d.act.tileKeys, 4 * M * lmheadKeyStride(d.vocabPadded)},
		{&d.act.outTok, 4 * M},
		{&d.act.lnStats, 4 * lnStatsWords(c.NumLayers, N)},
		{&d.act.attnPart, 4 * M * c.NumHeads * maxDecodeSplits * (C/c.NumHeads + 2)},
	} {
		if *b.p, err = g.drv.memAlloc(b.bytes); err != nil {
			return fmt.Errorf("cuda: activations: %w", err)
		}
	}
	if err := d.buildWGMaps(); err != nil {
		return err
	}
	if err := d.allocStages(inWords); err != nil {
		return err
	}
	// Tuning trials of accumulating GEMMs write into the logits buffer, which
	// is free until the LM head runs.
	g.blas.scratch, g.blas.scratchBytes = d.act.logits, 4*M*d.vocabPadded
	return d.allocKV()
}

// allocStages allocates the staging of each stage for steps of up to
// inWords input words.
func (d *Device) allocStages(inWords int) error {
	g, M := d.g, d.opts.MaxSeqs
	var err error
	for i := range d.queue.stage {
		st := &d.queue.stage[i]
		st.index = i
		if st.inPtr, err = g.drv.hostAlloc(4 * inWords); err != nil {
			return err
		}
		if st.devIn, err = g.drv.memAlloc(4 * inWords); err != nil {
			return fmt.Errorf("cuda: step inputs: %w", err)
		}
		if st.outPtr, st.outDev, err = g.drv.hostAllocMapped(8 * M); err != nil {
			return err
		}
		st.in = unsafe.Slice((*int32)(st.inPtr), inWords)
		st.out = unsafe.Slice((*int32)(st.outPtr), 2*M)
		if st.event, err = g.drv.eventCreate(eventDisableTiming); err != nil {
			return err
		}
		if st.copied, err = g.drv.eventCreate(eventDisableTiming); err != nil {
			return err
		}
	}
	return nil
}

// kvBytesPerBlock is the device memory one KV block takes: K and V of every
// layer for BlockSizeTokens positions, 16-bit (fp16 for GPT-2's step, bf16
// for the rotary block), NKV·HS channels each.
func kvBytesPerBlock(c model.Config, blockSizeTokens, elemBytes int) int {
	return 2 * c.NumLayers * blockSizeTokens * c.KVChannels() * elemBytes
}

// kvElemBytes is the size of one cached key or value element: 2 (fp16,
// bf16), 4 in the rotary block's fp32 mode.
func (d *Device) kvElemBytes() int {
	if d.q3 != nil {
		return d.q3.actBytes()
	}
	return 2
}

// kvFreeMargin is the device memory the KV pool leaves free when free
// memory, not the utilization, bounds it: graph captures and cuBLASLt plans
// allocate after the pool.
const kvFreeMargin = 1 << 30

// kvPoolBlocks sizes the KV pool from the utilization, as vLLM's
// gpu_memory_utilization: a limit on this process's own memory (util ×
// total, less what the device allocated since it opened: freeAtOpen − free),
// so that two servers at 0.4 each share one GPU. Where other processes leave
// less than that free, the pool takes what is free less kvFreeMargin. The
// cuBLASLt workspace is kept back too, and one block of per bytes is the
// scratch block.
func kvPoolBlocks(total, freeAtOpen, free int, util float64, per int) (int, error) {
	limit, own := int(float64(total)*util), max(0, freeAtOpen-free)
	budget := min(limit-own, free-kvFreeMargin) - gemmWorkspaceBytes
	if n := budget/per - 1; n >= 1 {
		return n, nil
	}
	return 0, fmt.Errorf("cuda: no memory left for the KV cache: utilization %.2f of %d MB allows %d MB, this server "+
		"already holds %d MB (weights and buffers) and %d MB are free; raise --gpu-memory-utilization, set "+
		"--kv-cache-tokens, or free the GPU", util, total>>20, limit>>20, own>>20, free>>20)
}

// allocKV makes the one allocation that holds every KV block (plus the
// scratch block), sized by kvPoolBlocks when no count was given.
func (d *Device) allocKV() error {
	per := kvBytesPerBlock(d.cfg, d.kv.BlockSizeTokens, d.kvElemBytes())
	if d.kv.NumBlocks <= 0 {
		free, total, err := d.g.drv.memInfo()
		if err != nil {
			return err
		}
		if d.kv.NumBlocks, err = kvPoolBlocks(total, d.freeAtOpen, free, d.opts.GPUMemoryUtilization, per); err != nil {
			return err
		}
	}
	blocks := d.kv.NumBlocks + 1
	d.cache.scratchBlock = int32(d.kv.NumBlocks)
	d.cache.layerBytes = blocks * d.kv.BlockSizeTokens * d.cfg.KVChannels() * d.kvElemBytes()
	var err error
	if d.cache.base, err = d.g.drv.memAlloc(2 * d.cfg.NumLayers * d.cache.layerBytes); err != nil {
		return fmt.Errorf("cuda: KV cache of %d blocks (%d MB): %w", blocks, 2*d.cfg.NumLayers*d.cache.layerBytes>>20, err)
	}
	if os.Getenv("ROSEINFER_CUDA_VERBOSE") != "" {
		fmt.Fprintf(os.Stderr, "cuda: %s (%s), KV cache %d blocks x %d tokens = %d MB\n", d.g.name, d.g.arch,
			d.kv.NumBlocks, d.kv.BlockSizeTokens, 2*d.cfg.NumLayers*d.cache.layerBytes>>20)
	}
	return nil
}

// Name implements device.Device.
func (d *Device) Name() string { return "cuda" }

// KVConfig is the cache the device allocated (NumBlocks filled in when New
// sized it from memory). The engine's block pool must use exactly this.
func (d *Device) KVConfig() device.KVConfig { return d.kv }

// GPUName is the device's marketing name and architecture, for logs and results.
func (d *Device) GPUName() string { return fmt.Sprintf("%s (%s)", d.g.name, d.g.arch) }

// Forward implements device.Device: Submit then Collect.
func (d *Device) Forward(b *device.Batch, out []device.Sampled) ([]device.Sampled, error) {
	if len(d.queue.pending) > 0 {
		return out, fmt.Errorf("cuda: Forward with %d submitted steps not collected", len(d.queue.pending))
	}
	if err := d.Submit(b); err != nil {
		return out, err
	}
	return d.Collect(out)
}

// Submit queues one step on the GPU and returns without waiting for it, so
// the caller can prepare the next step meanwhile (overlap scheduling). At
// most two steps may be in flight. A decode Seq whose token is negative takes
// the token its sequence sampled in the previous submitted step, read on the
// GPU: the next step can be queued before the previous one's samples are back.
func (d *Device) Submit(b *device.Batch) error {
	if d.closed {
		return fmt.Errorf("cuda: device closed")
	}
	if len(d.queue.pending) == len(d.queue.stage) {
		return fmt.Errorf("cuda: %d steps already in flight; Collect first", len(d.queue.pending))
	}
	NVTXPush("cuda submit")
	defer NVTXPop()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	g := d.g
	if err := g.bind(); err != nil {
		return err
	}
	q := &d.queue
	st := &q.stage[q.next]
	rows, graphSize := d.chunkRows(b), 0
	if !d.opts.NoCUDAGraph && rows > 0 {
		graphSize = d.graphSizeFor(rows)
	}
	if err := d.buildPlan(b, st, rows > 0, graphSize); err != nil {
		return err
	}
	p := &st.plan
	if err := d.uploadInputs(st); err != nil {
		return err
	}
	hook := d.instr.hook
	if hook != nil {
		if err := hook.stepBegin(st); err != nil {
			return err
		}
	}
	var err error
	if graphSize > 0 {
		err = d.runGraph(p)
	} else {
		err = d.forward(p)
	}
	if err != nil {
		return err
	}
	if hook != nil {
		if err := hook.stepEnd(st); err != nil {
			return err
		}
	}
	// The sampler wrote the ids and logprobs into st.outPtr (mapped): the
	// event marks them as arrived.
	if err := g.drv.eventRecord(st.event, g.stream); err != nil {
		return err
	}
	// Rows of this step, for the next step's on-GPU token hand-off.
	clear(q.prevRow)
	for row, si := range p.seqOfRow {
		if si >= 0 {
			q.prevRow[b.Seqs[si].SeqID] = row
		}
	}
	q.pending = append(q.pending, q.next)
	q.next = (q.next + 1) % len(q.stage)
	return nil
}

// uploadInputs copies st's inputs to the device on the copy stream and makes
// the step's stream wait for them. With overlap scheduling the copy runs
// while the previous step is still on the GPU, instead of between the two
// steps (~3-4 us at batch 1 on the H100, docs/cuda.md). st.devIn is free: the step that used
// this stage before has been collected.
func (d *Device) uploadInputs(st *staging) error {
	drv, g := d.g.drv, d.g
	if err := drv.htodAsync(st.devIn, st.inPtr, 4*st.plan.lay.total, g.copyStream); err != nil {
		return err
	}
	if err := drv.eventRecord(st.copied, g.copyStream); err != nil {
		return err
	}
	return drv.streamWaitEvent(g.stream, st.copied)
}

// Collect waits for the oldest submitted step and returns one Sampled per Seq
// of that step's Batch, in order (Token -1 where Sample was false).
func (d *Device) Collect(out []device.Sampled) ([]device.Sampled, error) {
	if len(d.queue.pending) == 0 {
		return out, fmt.Errorf("cuda: Collect with no submitted step")
	}
	NVTXPush("cuda collect")
	defer NVTXPop()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.g.bind(); err != nil {
		return out, err
	}
	st := &d.queue.stage[d.queue.pending[0]]
	d.queue.pending = d.queue.pending[1:]
	hook := d.instr.hook
	var waitStart time.Time
	if hook != nil {
		waitStart = time.Now()
	}
	if err := d.g.drv.eventSync(st.event); err != nil {
		return out, fmt.Errorf("cuda: step failed on the GPU: %w", err)
	}
	if hook != nil {
		if err := hook.collected(st, time.Since(waitStart)); err != nil {
			return out, err
		}
	}
	out = out[:0]
	for _, row := range st.plan.rowOfSeq {
		s := device.Sampled{Token: -1}
		if row >= 0 {
			s.Token = st.out[2*row]
			s.Logprob = math.Float32frombits(uint32(st.out[2*row+1]))
		}
		out = append(out, s)
	}
	return out, nil
}

// Close frees all device memory. It is safe to call twice.
func (d *Device) Close() error {
	if d.closed {
		return nil
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	d.closeLocked()
	return nil
}

func (d *Device) closeLocked() {
	d.closed = true
	g := d.g
	if g == nil {
		return
	}
	_ = g.bind()
	_ = g.sync()
	_ = g.drv.streamSync(g.copyStream) // an upload whose step never got queued still writes into a stage's devIn
	if d.instr.hook != nil {
		d.instr.hook.close()
		d.instr.hook, d.instr.spans = nil, nil
	}
	d.dropGraphs()
	if d.q3 != nil {
		d.freeRotary()
	}
	for _, p := range []devPtr{d.act.residual, d.act.ln, d.act.qkv, d.act.attn, d.act.fc, d.act.delta, d.act.lnf, d.act.attnPart,
		d.act.logits, d.act.tileKeys, d.act.outTok, d.act.lnStats, d.cache.base, d.w.base} {
		g.drv.memFree(p)
	}
	d.act, d.cache.base, d.w.base = activations{}, 0, 0
	d.tma.free()
	for i := range d.queue.stage {
		g.drv.hostFree(d.queue.stage[i].inPtr)
		g.drv.hostFree(d.queue.stage[i].outPtr)
		g.drv.memFree(d.queue.stage[i].devIn)
		for _, e := range []uintptr{d.queue.stage[i].event, d.queue.stage[i].copied} {
			if e != 0 {
				purego.SyscallN(g.drv.cuEventDestroy, e)
			}
		}
		d.queue.stage[i] = staging{}
	}
	g.close()
	d.g = nil
}
