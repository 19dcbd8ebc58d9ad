package cuda

import (
	"fmt"
	"slices"
	"time"

	"github.com/roseinfer/roseinfer/engine/device"
	"github.com/roseinfer/roseinfer/engine/sample"
)

// Everything that would otherwise happen the first time a shape shows up on
// the serving path is done once when the device starts (prewarm):
//
//   - cuBLASLt plans. Building one asks the heuristic and times 16
//     candidates (64 synchronous GEMM runs), and
//     the first launch of each candidate loads its kernel module. On the H100
//     through the product path this cost 100+ ms TTFT outliers online and
//     made offline 14x slower than the device's own loop (docs/cuda.md): mixed
//     prefill/decode steps bring a new row count almost every step.
//   - CUDA graphs: one eager step, then a capture and an instantiation, per
//     padded decode batch size.
//   - the prefill and mixed-step kernels' first launch.
//
// To keep the set of shapes finite, a GEMM of n rows runs over gemmRows(n)
// rows: the extra rows compute on stale activation rows that nothing reads
// (every op but attention is row-independent, and attention reads only the
// step's real rows), and the buffers are sized for the largest step.

// smallGemmBuckets are the row buckets up to 512: the decode graph sizes,
// then steps of 32.
var smallGemmBuckets = []int{1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256,
	288, 320, 352, 384, 416, 448, 480, 512}

const (
	midGemmStep = 128  // rows 513..midGemmMax round up to a multiple of this
	midGemmMax  = 2048 // (at most 25% padding)
	bigGemmStep = 512  // above: multiples of 512 (at most 25% padding)
)

// gemmRows is the row count a GEMM of n rows runs at: its bucket, but at
// most limit, the rows its buffers hold (a step's n never exceeds that).
func gemmRows(n, limit int) int {
	b := n
	switch {
	case n <= 0:
		return n
	case n <= smallGemmBuckets[len(smallGemmBuckets)-1]:
		i, _ := slices.BinarySearch(smallGemmBuckets, n)
		b = smallGemmBuckets[i]
	case n <= midGemmMax:
		b = ceilDiv(n, midGemmStep) * midGemmStep
	default:
		b = ceilDiv(n, bigGemmStep) * bigGemmStep
	}
	if b > limit && limit >= n {
		return limit
	}
	return b
}

// gemmBuckets lists the distinct buckets of the row counts 1..limit for
// which use reports true (the rows that reach cuBLASLt).
func gemmBuckets(limit int, use func(n int) bool) []int {
	var out []int
	for n := 1; n <= limit; n++ {
		if !use(n) {
			continue
		}
		if b := gemmRows(n, limit); len(out) == 0 || out[len(out)-1] != b {
			out = append(out, b)
		}
	}
	return out
}

// prewarm plans (and tunes) every GEMM bucket, captures every decode graph
// and runs one mixed step; afterwards a shape it missed is planned from the
// heuristic alone, untimed. It leaves the stream idle. The KV block 0 and the
// scratch block get garbage, which the engine overwrites before reading.
func (d *Device) prewarm() error {
	start := time.Now()
	var err error
	if d.q3 != nil {
		err = d.prewarmRotaryGEMMs()
	} else {
		err = d.prewarmGEMMs()
	}
	if err != nil {
		return err
	}
	g := d.g
	graphs := 0
	if !d.opts.NoCUDAGraph {
		sizes := slices.Clone(d.opts.GraphBatchSizes)
		slices.Sort(sizes)
		for _, s := range slices.Compact(sizes) {
			if s < 1 || s > d.opts.MaxSeqs || s > d.opts.MaxStepTokens {
				continue
			}
			// Eager (plans), then captured and launched from each stage.
			for _, stage := range []int{0, 1, 0} {
				if err := d.warmStep(&device.Batch{}, s, stage); err != nil {
					return fmt.Errorf("cuda: prewarm decode graph of %d: %w", s, err)
				}
			}
			graphs++
		}
	}
	if err := d.warmMixedStep(); err != nil {
		return fmt.Errorf("cuda: prewarm mixed step: %w", err)
	}
	if err := g.sync(); err != nil {
		return err
	}
	g.blas.noTune = true
	d.instr.prewarmTook, d.instr.prewarmGraphs = time.Since(start), graphs
	return nil
}

// prewarmGEMMs plans the cuBLASLt GEMMs of GPT-2's step at every row bucket
// that reaches cuBLASLt.
func (d *Device) prewarmGEMMs() error {
	a, C := &d.act, d.cfg.Channels
	w := &d.w.layers[0]
	cublas := func(n int) bool { return !d.useGemv(n) && !d.useSkinny(n) }
	for _, n := range gemmBuckets(d.opts.MaxStepTokens, cublas) {
		if err := d.projection(a.qkv, 3*C, a.ln, w.qkvW, w.qkvB, n, C, 3*C, false); err != nil {
			return fmt.Errorf("cuda: prewarm qkv GEMM of %d rows: %w", n, err)
		}
		if err := d.residualGemm(a.attn, w.attProjW, w.attProjB, w.attProjB16, n, C); err != nil {
			return fmt.Errorf("cuda: prewarm attproj GEMM of %d rows: %w", n, err)
		}
		if err := d.projection(a.fc, 4*C, a.ln, w.fcW, w.fcB, n, C, 4*C, true); err != nil {
			return fmt.Errorf("cuda: prewarm fc GEMM of %d rows: %w", n, err)
		}
		if err := d.residualGemm(a.fc, w.fcProjW, w.fcProjB, w.fcProjB16, n, 4*C); err != nil {
			return fmt.Errorf("cuda: prewarm fcproj GEMM of %d rows: %w", n, err)
		}
	}
	for _, m := range gemmBuckets(d.opts.MaxSeqs, func(n int) bool { return !d.useGemv(n) }) {
		if err := d.lmheadGemm(m); err != nil {
			return fmt.Errorf("cuda: prewarm LM head GEMM of %d rows: %w", m, err)
		}
	}
	return nil
}

// warmStep runs b (padded to graphSize when > 0, through the graph path)
// from the given stage and waits for it: the stage's inputs are rewritten
// by the next call.
func (d *Device) warmStep(b *device.Batch, graphSize, stage int) error {
	st := &d.queue.stage[stage]
	if err := d.buildPlan(b, st, graphSize > 0, graphSize); err != nil {
		return err
	}
	if err := d.uploadInputs(st); err != nil {
		return err
	}
	var err error
	if graphSize > 0 {
		err = d.runGraph(&st.plan)
	} else {
		err = d.forward(&st.plan)
	}
	if err != nil {
		return err
	}
	return d.g.sync()
}

// warmMixedStep runs one step with a prefill chunk spanning two attention
// tiles and a decode token, each sampled, if the cache and limits allow.
func (d *Device) warmMixedStep() error {
	B := d.kv.BlockSizeTokens
	n := min(d.path.prefillTile+1, d.opts.MaxStepTokens-1, d.cfg.MaxSeqLen-1)
	if n < 2 || d.opts.MaxSeqs < 2 || d.kv.NumBlocks < ceilDiv(n, B)+1 {
		return nil
	}
	var prefill device.Seq
	prefill.Tokens = make([]int32, n)
	for i := range ceilDiv(n, B) {
		prefill.BlockTable = append(prefill.BlockTable, int32(i))
	}
	prefill.SeqID, prefill.Sample, prefill.BannedToken = 1, true, -1
	prefill.Params = sample.Params{Temperature: 0.7, TopK: 50, TopP: 0.9}
	decode := device.Seq{SeqID: 2, Tokens: []int32{0}, BlockTable: []int32{int32(len(prefill.BlockTable))}, Sample: true, BannedToken: -1,
		Params: sample.Params{TopP: 1}}
	return d.warmStep(&device.Batch{Seqs: []device.Seq{prefill, decode}}, 0, 0)
}
