// Package cuda is roseinfer's NVIDIA GPU device: GPT-2 in fp16 with fp32
// accumulation, a paged KV cache in one device allocation, attention over
// mixed prefill chunks and decode tokens, sampling on the GPU, CUDA graphs for
// decode steps and an asynchronous Submit/Collect pair for overlap scheduling.
//
// Nothing is linked at build time: libcuda, libnvrtc and libcublasLt are
// opened at run time through purego (CGO_ENABLED=0 builds), and the kernels
// (kernels/*.cu, embedded) are compiled by NVRTC for the GPU at hand on first
// use and cached on disk. On a machine without CUDA, Available reports what is
// missing and New fails with the same error.
//
// It implements device.Device, device.AsyncDevice and phase.SpanReporter; it
// imports engine/model, engine/device and engine/profile/phase only.
package cuda

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/roseinfer/roseinfer/engine/device"
	"github.com/roseinfer/roseinfer/engine/model"
	"github.com/roseinfer/roseinfer/engine/profile/phase"
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
	// SimplePrefillAttention uses the CUDA-core prefill attention kernel
	// instead of the tensor-core one (which needs head size 64): an A/B switch
	// and a fallback.
	SimplePrefillAttention bool
	// GPUMemoryUtilization is the fraction of the GPU's memory the process
	// may use (weights + activations + KV cache) when New is given
	// KVConfig.NumBlocks <= 0; KVConfig() then reports the blocks chosen.
	GPUMemoryUtilization float64
	// GemvMaxRows: steps of at most this many token rows (small-batch
	// decode) run their projections through the tensor-core GEMV kernels
	// with LayerNorm fused (gemv.cu) instead of LayerNorm kernels and
	// cuBLASLt. 0 = the default, negative = never (the A/B switch).
	GemvMaxRows int
	// BlockDecodeAttention uses the block-per-(sequence, head) decode
	// attention kernel instead of the warp-per-(sequence, head) one (head
	// size 64 only; other sizes always use the block kernel): an A/B switch.
	BlockDecodeAttention bool
	// SkinnyGemmRows: steps of more than GemvMaxRows and at most this many
	// (<= 128) token rows run the layer projections through the split-K
	// tensor-core kernel (gemm_skinny.cu) instead of cuBLASLt. 0 = the
	// default (32: on the H100 it beats cuBLASLt at 24 and 32 rows and
	// loses at 48 and above), negative = never.
	SkinnyGemmRows int
	// WgmmaGemmRows: steps of more token rows than GemvMaxRows and
	// SkinnyGemmRows and at most this many run their qkv, attention and fc
	// projections (K = C <= 768), and fcproj unless NoWgmmaSplitK, through
	// gemm_wg.cu (TMA + wgmma, sm_90a) instead of cuBLASLt. 0 = the default (128: on the H100 decode steps
	// of batch 48-128 are 3-12% faster), negative = never (the A/B switch).
	WgmmaGemmRows int
	// NoWgmmaSplitK leaves the projection with K > 768 (fcproj) to cuBLASLt
	// instead of gemm_wg.cu with K split over blocks whose sums are added
	// into the residual stream (fp32 atomics: the last bits of the sums may
	// differ between runs): the A/B switch.
	NoWgmmaSplitK bool
	// NoWgmmaLNFold keeps the LayerNorm kernel before fc where gemm_wg.cu
	// takes attproj and fc, instead of folding it into their epilogues
	// (attproj leaves x * gamma and each row's sum and sum of squares, fc
	// applies rstd, the mean and gamma W^T, beta W^T + b): the A/B switch.
	NoWgmmaLNFold bool
	// NoWgmmaPair runs the folded attproj and fc as two kernels instead of
	// one grid with a grid barrier between them (gemm_wg_pair, gemm_wg.cu):
	// the A/B switch.
	NoWgmmaPair bool
	// NoPDL launches kernels without programmatic dependent launch (each
	// kernel then starts only when the previous one has finished): the A/B
	// switch for the kernels' early weight fetch (common.cuh).
	NoPDL bool
	// NoPrewarm skips planning and tuning every GEMM bucket, capturing every
	// decode graph and running a mixed step when the device starts
	// (prewarm.go); those costs then fall on the first steps that need them.
	// ROSEINFER_CUDA_PREWARM=0 does the same: the A/B switch.
	NoPrewarm bool
	// ChunkRows: a step whose sequences each bring at most this many tokens
	// (decode steps, and the short uncached tail of a prompt whose prefix is
	// cached, alone or beside decodes) runs as one-token rows through the
	// decode attention kernels and, padded like a decode step, a captured
	// graph, instead of eagerly with the prefill kernels. 0 = the default
	// (16), negative = only one-token sequences (the A/B switch);
	// ROSEINFER_CUDA_CHUNK_ROWS overrides it.
	ChunkRows int
	// NoTiledLMHead runs the small-step LM head through gemv.cu and lets the
	// sampler scan whole logit rows, instead of lmhead.cu and its tile
	// maxima: the A/B switch.
	NoTiledLMHead bool
	// DecodeWarpsPerSM: decode steps whose (sequence, head) pairs take 8
	// key splits or fewer and leave room for 2 (batch 11-132 on the H100,
	// GPT-2's 12 heads) split them for up to this many warps an SM, 2, 4 or
	// 8 splits, through the 80-register warp kernel (decodeSplits). 0 = the
	// default (24: batch 16-128 2-5% faster on the H100 than 8 warps an SM
	// through the 128-register kernels), negative = never (the A/B switch).
	DecodeWarpsPerSM int
	// FP32Logits keeps cuBLASLt's LM head (steps of 17+ sampled rows)
	// writing fp32 logits, as the LM head kernels of our own do for fewer
	// rows, instead of fp16 ones (summed in fp32 either way; fp16 halves the
	// bytes written and read, as vLLM's logits in the model's dtype): the
	// A/B switch.
	FP32Logits bool
}

// DefaultOptions are used for every zero field of Options.
var DefaultOptions = Options{
	MaxStepTokens:        8192,
	MaxSeqs:              256,
	GraphBatchSizes:      []int{1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256},
	GPUMemoryUtilization: 0.9,
	GemvMaxRows:          maxGemvRows,
	SkinnyGemmRows:       32,
	WgmmaGemmRows:        128,
	ChunkRows:            16,
	DecodeWarpsPerSM:     24,
}

// Device runs GPT-2 steps on one GPU. Methods are called from one goroutine
// at a time (the engine loop); each call locks that goroutine to its OS
// thread while it talks to the driver, since a CUDA context is per thread.
type Device struct {
	g    *gpu
	cfg  model.Config
	kv   device.KVConfig
	opts Options

	w   gpuWeights
	act activations

	kvBase       devPtr
	kvLayerBytes int
	maxBlocks    int   // block table row length: ceil(maxT / B)
	scratchBlock int32 // one extra KV block that padding rows write into
	vocabPadded  int   // logits row stride (V rounded up to 128)
	prefillTile  int   // query rows per prefill attention block (the kernel's BR)

	kEncoder, kLayerNorm, kResidualAdd, kKVWrite, kDecode, kDecodeSplits, kDecodeSplitsR4, kCombine, kPrefill, kSample kernel
	kGemv                                                                                                              [2][2][2]kernel // [layernorm][rows > 8][2 column tiles]
	kSampleH                                                                                                           kernel          // sample_rows_h: the sampler over fp16 logits (halfLogits)
	kLMHead                                                                                                            [2]kernel       // [rows > 8], lmhead.cu
	skinnyVariant                                                                                                      *skinnyKernel   // nil: skinnyKernelFor (SetSkinnyVariant)
	warpDecode, gemvOK, skinnyOK, lmheadOK, wgOK, wgPairOK                                                             bool
	wgMaps                                                                                                             map[devPtr]uintptr // a matrix's TMA descriptor in wgArena (gemm_wg.go)
	wgArena                                                                                                            *cArena
	wgCluster                                                                                                          int // column tiles sharing x rows in gemm_wg.cu
	noFusedResidual, residualTried                                                                                     bool

	stage     [2]staging // pinned host buffers, alternating so one step can be queued while another runs
	next      int        // stage the next Submit uses
	pending   []int      // stages submitted and not yet collected, oldest first
	prevRow   map[uint64]int
	graphs    map[graphKey]*decodeGraph
	retired   []decodeGraph // replaced graphs (spans.go), freed by dropGraphs
	closed    bool
	prof      *opProfile
	capturing bool // a decode graph is being captured on the stream

	spansOn   bool                // phase.SpanReporter: time each step's GPU work
	lastSpans [3]phase.DeviceSpan // of the step Collect returned last (spans.go)
	nSpans    int                 // how many of lastSpans are valid
	// The sampler's event (spans.go): forward records sampleEvent right
	// before the sampler kernel (0: none) and sets sampleRecorded; graphs
	// captured once graphSample is set carry a node for it, which records
	// sampleSpare when the step is not timed.
	sampleEvent, sampleSpare    uintptr
	sampleRecorded, graphSample bool

	stats *deviceStats // ROSEINFER_CUDA_STATS; nil when off
}

// staging is one step's pinned host memory: inputs going up, samples coming
// down, and the event that marks the samples as arrived. Each stage has its
// own device copy of the inputs, so a step's inputs can go up while the
// previous step (the other stage) still reads its own.
type staging struct {
	index  int // in Device.stage
	in     []int32
	devIn  devPtr  // the inputs on the device, read by the step's kernels
	copied uintptr // event: devIn holds this step's inputs
	out    []int32 // (id, logprob bits) per sampled row, written by the sampler
	event  uintptr
	plan   stepPlan
	inPtr  unsafe.Pointer
	outPtr unsafe.Pointer // out's memory, mapped into the GPU's address space
	outDev devPtr         // outPtr's device address

	spanStart, spanEnd uintptr // timing events around the step's GPU work, while spans or stats are on
	timed              bool    // this step recorded them
	spanSample         uintptr // timing event right before the sampler kernel, while spans are on
	sampleTimed        bool    // this step recorded it

	kind       stepKind      // for the stats (on)
	submitAt   time.Time     // when Submit began (stats on)
	submitHost time.Duration // how long Submit took (stats on)
	gap        time.Duration // from the last Collect's return to this Submit (stats on)
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
	if v := os.Getenv("ROSEINFER_CUDA_CHUNK_ROWS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("cuda: ROSEINFER_CUDA_CHUNK_ROWS=%q: want an integer (negative: one-token sequences only)", v)
		}
		opts.ChunkRows = n
	}
	opts = withDefaults(opts)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	g, err := openGPU()
	if err != nil {
		return nil, err
	}
	g.pdl = !opts.NoPDL
	d := &Device{g: g, cfg: w.Config, kv: kv, opts: opts, prevRow: map[uint64]int{}, graphs: map[graphKey]*decodeGraph{}, stats: newDeviceStats()}
	if err := d.init(w); err != nil {
		d.closeLocked()
		return nil, err
	}
	if d.stats != nil {
		if err := d.createSpanEvents(); err != nil {
			d.closeLocked()
			return nil, err
		}
	}
	if d.prewarmEnabled() {
		if err := d.prewarm(); err != nil {
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
	if o.GemvMaxRows == 0 {
		o.GemvMaxRows = def.GemvMaxRows
	}
	o.GemvMaxRows = min(o.GemvMaxRows, maxGemvRows)
	if o.SkinnyGemmRows == 0 {
		o.SkinnyGemmRows = def.SkinnyGemmRows
	}
	if o.WgmmaGemmRows == 0 {
		o.WgmmaGemmRows = def.WgmmaGemmRows
	}
	if o.ChunkRows == 0 {
		o.ChunkRows = def.ChunkRows
	}
	if o.DecodeWarpsPerSM == 0 {
		o.DecodeWarpsPerSM = def.DecodeWarpsPerSM
	}
	if o.MaxSeqs > o.MaxStepTokens {
		o.MaxSeqs = o.MaxStepTokens
	}
	return o
}

func (d *Device) init(w *model.Weights) error {
	g, c := d.g, d.cfg
	if err := d.resolveKernels(); err != nil {
		return err
	}
	var err error
	if d.w, err = uploadWeights(g, w); err != nil {
		return err
	}
	N, M, C := d.opts.MaxStepTokens, d.opts.MaxSeqs, c.Channels
	d.vocabPadded = paddedVocab(c.VocabSize)
	d.maxBlocks = ceilDiv(c.MaxSeqLen, d.kv.BlockSizeTokens)
	maxTiles := ceilDiv(N, min(prefillTileRows, prefillTileRowsMMA)) + M // either prefill kernel
	inWords := newLayout(N, M, maxTiles, M, d.maxBlocks).total
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
	for i := range d.stage {
		st := &d.stage[i]
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
	// Tuning trials of accumulating GEMMs write into the logits buffer, which
	// is free until the LM head runs.
	g.blas.scratch, g.blas.scratchBytes = d.act.logits, 4*M*d.vocabPadded
	return d.allocKV()
}

// KVBytesPerBlock is the device memory one KV block takes: K and V of every
// layer for BlockSizeTokens positions, fp16.
func KVBytesPerBlock(c model.Config, blockSizeTokens int) int {
	return 2 * c.NumLayers * blockSizeTokens * c.Channels * 2
}

// allocKV makes the one allocation that holds every KV block (plus the
// scratch block), sized from free memory when no count was given.
func (d *Device) allocKV() error {
	per := KVBytesPerBlock(d.cfg, d.kv.BlockSizeTokens)
	if d.kv.NumBlocks <= 0 {
		free, total, err := d.g.drv.memInfo()
		if err != nil {
			return err
		}
		budget := int(float64(total)*d.opts.GPUMemoryUtilization) - (total - free) - gemmWorkspaceBytes
		d.kv.NumBlocks = budget/per - 1
		if d.kv.NumBlocks < 1 {
			return fmt.Errorf("cuda: no memory left for the KV cache (%d MB free of %d MB, utilization %.2f)",
				free>>20, total>>20, d.opts.GPUMemoryUtilization)
		}
	}
	blocks := d.kv.NumBlocks + 1
	d.scratchBlock = int32(d.kv.NumBlocks)
	d.kvLayerBytes = blocks * d.kv.BlockSizeTokens * d.cfg.Channels * 2
	var err error
	if d.kvBase, err = d.g.drv.memAlloc(2 * d.cfg.NumLayers * d.kvLayerBytes); err != nil {
		return fmt.Errorf("cuda: KV cache of %d blocks (%d MB): %w", blocks, 2*d.cfg.NumLayers*d.kvLayerBytes>>20, err)
	}
	if os.Getenv("ROSEINFER_CUDA_VERBOSE") != "" {
		fmt.Fprintf(os.Stderr, "cuda: %s (%s), KV cache %d blocks x %d tokens = %d MB\n", d.g.name, d.g.arch,
			d.kv.NumBlocks, d.kv.BlockSizeTokens, 2*d.cfg.NumLayers*d.kvLayerBytes>>20)
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
	if len(d.pending) > 0 {
		return out, fmt.Errorf("cuda: Forward with %d submitted steps not collected", len(d.pending))
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
	if len(d.pending) == len(d.stage) {
		return fmt.Errorf("cuda: %d steps already in flight; Collect first", len(d.pending))
	}
	NVTXPush("cuda submit")
	defer NVTXPop()
	var start time.Time
	var plans0, tuned0 int
	if d.stats != nil {
		start, plans0, tuned0 = time.Now(), d.g.blas.plansBuilt, d.g.blas.plansTuned
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	g := d.g
	if err := g.bind(); err != nil {
		return err
	}
	st := &d.stage[d.next]
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
	st.timed = (d.spansOn || d.stats != nil) && st.spanStart != 0
	if d.stats != nil {
		st.kind = d.stepKindOf(p)
	}
	if st.timed {
		if err := g.drv.eventRecord(st.spanStart, g.stream); err != nil {
			return err
		}
	}
	d.sampleEvent, d.sampleRecorded = 0, false
	if st.timed && d.spansOn {
		d.sampleEvent = st.spanSample
	}
	var err error
	if graphSize > 0 {
		err = d.runGraph(p)
	} else {
		err = d.forward(p)
	}
	st.sampleTimed = d.sampleRecorded
	d.sampleEvent = 0
	if err != nil {
		return err
	}
	if st.timed {
		if err := g.drv.eventRecord(st.spanEnd, g.stream); err != nil {
			return err
		}
	}
	// The sampler wrote the ids and logprobs into st.outPtr (mapped): the
	// event marks them as arrived.
	if err := g.drv.eventRecord(st.event, g.stream); err != nil {
		return err
	}
	// Rows of this step, for the next step's on-GPU token hand-off.
	clear(d.prevRow)
	for row, si := range p.seqOfRow {
		if si >= 0 {
			d.prevRow[b.Seqs[si].SeqID] = row
		}
	}
	d.pending = append(d.pending, d.next)
	d.next = (d.next + 1) % len(d.stage)
	d.stats.submitted(st, start, st.kind, g.blas.plansBuilt-plans0, g.blas.plansTuned-tuned0)
	return nil
}

// uploadInputs copies st's inputs to the device on the copy stream and makes
// the step's stream wait for them. With overlap scheduling the copy runs
// while the previous step is still on the GPU, instead of between the two
// steps (~3-4 us at batch 1, NOTES.md). st.devIn is free: the step that used
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
	if len(d.pending) == 0 {
		return out, fmt.Errorf("cuda: Collect with no submitted step")
	}
	NVTXPush("cuda collect")
	defer NVTXPop()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.g.bind(); err != nil {
		return out, err
	}
	st := &d.stage[d.pending[0]]
	d.pending = d.pending[1:]
	waitStart := time.Now()
	if err := d.g.drv.eventSync(st.event); err != nil {
		return out, fmt.Errorf("cuda: step failed on the GPU: %w", err)
	}
	wait := time.Since(waitStart)
	if err := d.collectProfile(); err != nil {
		return out, err
	}
	gpuTime, err := d.collectSpan(st)
	if err != nil {
		return out, err
	}
	d.stats.collected(st, wait, gpuTime)
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
	if g.blas != nil {
		d.stats.report(g.blas)
	}
	d.dropGraphs()
	for _, p := range []devPtr{d.act.residual, d.act.ln, d.act.qkv, d.act.attn, d.act.fc, d.act.delta, d.act.lnf, d.act.attnPart,
		d.act.logits, d.act.tileKeys, d.act.outTok, d.act.lnStats, d.kvBase, d.w.base} {
		g.drv.memFree(p)
	}
	d.act, d.kvBase, d.w.base, d.wgMaps = activations{}, 0, 0, nil
	if d.wgArena != nil {
		d.wgArena.free()
		d.wgArena = nil
	}
	for i := range d.stage {
		g.drv.hostFree(d.stage[i].inPtr)
		g.drv.hostFree(d.stage[i].outPtr)
		g.drv.memFree(d.stage[i].devIn)
		for _, e := range []uintptr{d.stage[i].event, d.stage[i].copied, d.stage[i].spanStart, d.stage[i].spanEnd, d.stage[i].spanSample} {
			if e != 0 {
				purego.SyscallN(g.drv.cuEventDestroy, e)
			}
		}
		d.stage[i] = staging{}
	}
	if d.sampleSpare != 0 {
		purego.SyscallN(g.drv.cuEventDestroy, d.sampleSpare)
		d.sampleSpare = 0
	}
	g.close()
	d.g = nil
}
