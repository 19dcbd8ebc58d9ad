//go:build cudalab

// Command cudabench measures the CUDA device alone (no engine, no server):
// decode step time at several batch sizes with and without CUDA graphs, an
// offline-style run (prompts prefilled in large steps, then batched decode)
// with and without overlap, a per-op time table, and the device's copy and
// GEMM ceilings. It prints a Markdown table last. It uses the device's lab
// (engine/device/cuda's lab_*.go), so it builds with the cudalab tag:
//
//	go build -tags cudalab -o .gpu/cudabench ./cmd/cudabench
//	cudabench -preset gpt2 -batches 1,32,128 -ctx 300
//	cudabench -batches 1,128 -skip-profile -variants graph
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/roseinfer/roseinfer/engine/device"
	"github.com/roseinfer/roseinfer/engine/device/cuda"
	"github.com/roseinfer/roseinfer/engine/model"
	"github.com/roseinfer/roseinfer/engine/profile/phase"
	"github.com/roseinfer/roseinfer/engine/sample"
)

type options struct {
	preset                string
	batches               []int
	ctx, steps            int
	ctxRangeRatio         float64 // decode contexts uniform in ctx × [1 - r, 1 + r] (vLLM's --random-range-ratio)
	prompts, promptLen    int
	gen, blockSize        int
	maxStepTokens         int
	skipOffline, skipProf bool
	gpuSpans              bool // overlapped decode: also the steps' GPU time (span events)
	ncuBatches            string
	gemmChain             string
	persistProbe          bool
	prefillSizes          string
	chunkProfile          string
	profilePrefillTokens  int
	float32               bool
	sampling              string
	variants              map[string]bool     // decode variants to time (nil: all)
	profileHook           func(on bool) error // decodeStep: around the timed steps (ncu)
}

func main() {
	var o options
	var batches string
	flag.StringVar(&o.preset, "preset", "gpt2", "model preset (random weights)")
	flag.StringVar(&batches, "batches", "1,8,16,32,128", "decode batch sizes")
	flag.IntVar(&o.ctx, "ctx", 300, "context length of decode sequences")
	flag.Float64Var(&o.ctxRangeRatio, "ctx-range-ratio", 0, "decode contexts uniform in ctx*(1-r) .. ctx*(1+r), mean ctx (0: all ctx; as vLLM's --random-range-ratio)")
	flag.IntVar(&o.steps, "steps", 50, "timed decode steps per batch size")
	flag.IntVar(&o.prompts, "prompts", 128, "offline: prompts")
	flag.IntVar(&o.promptLen, "prompt-len", 256, "offline: prompt tokens")
	flag.IntVar(&o.gen, "gen", 64, "offline: generated tokens per prompt")
	flag.IntVar(&o.blockSize, "block-size", 16, "KV block size in tokens")
	flag.IntVar(&o.maxStepTokens, "max-step-tokens", 8192, "largest step in tokens")
	flag.BoolVar(&o.skipOffline, "skip-offline", false, "skip the offline run")
	flag.BoolVar(&o.skipProf, "skip-profile", false, "skip the per-op table")
	flag.BoolVar(&o.float32, "float32", false, "run a Qwen3 preset in fp32 (cuda.Options.Float32, serve --dtype float32)")
	flag.IntVar(&o.profilePrefillTokens, "profile-prefill-tokens", 0, "per-op table: tokens of the profiled prefill step (default -max-step-tokens; serve's step budget is 2048)")
	flag.BoolVar(&o.gpuSpans, "gpu-spans", false, "overlapped decode: also report the median GPU time of a step (events around each step)")
	flag.StringVar(&o.ncuBatches, "ncu-batches", "", "only run one profiled decode step per batch size (for ncu --profile-from-start off)")
	flag.StringVar(&o.sampling, "sampling", "T0.7/p0.9/k50", "sampling of every step: greedy or T<temperature>/p<top_p>/k<top_k> (T0.6/p1/k0: nano-vllm's protocol)")
	flag.StringVar(&o.gemmChain, "gemm-chain", "", "only run the projection diagnostics at these row counts (e.g. 64,128)")
	flag.BoolVar(&o.persistProbe, "persist-probe", false, "only run the batch-1 layer loop probes (persist.cu, flow.cu; a Qwen3 preset on Hopper)")
	flag.StringVar(&o.chunkProfile, "chunk-profile", "", "only time and profile per op a prompt chunk of N new tokens after M cached (N@M), eager")
	flag.StringVar(&o.prefillSizes, "prefill-sizes", "", "only time one whole-prompt prefill of each of these lengths, in order, on the fresh device (first-time costs)")
	variants := flag.String("variants", "", "semicolon-separated decode variants to time: graph, no graph (default all)")
	cpuProfile := flag.String("cpuprofile", "", "write the host's CPU profile of the whole run to this file (go tool pprof)")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "cudabench:", err)
			os.Exit(2)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	if *variants != "" {
		o.variants = map[string]bool{}
		for _, v := range strings.Split(*variants, ";") {
			o.variants[strings.TrimSpace(v)] = true
		}
	}
	var err error
	if o.batches, err = parseBatches(batches); err != nil {
		fmt.Fprintln(os.Stderr, "cudabench:", err)
		os.Exit(2)
	}
	if err := checkContexts(o.ctx, o.ctxRangeRatio); err != nil {
		fmt.Fprintln(os.Stderr, "cudabench:", err)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "cudabench:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func parseBatches(list string) ([]int, error) {
	var out []int
	for _, s := range strings.Split(list, ",") {
		b, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || b < 1 {
			return nil, fmt.Errorf("bad batch size %q", s)
		}
		out = append(out, b)
	}
	return out, nil
}

type row struct{ name, value string }

// rows collects the summary; each row is also printed when measured, so a
// later failure loses nothing.
var rows []row

func record(name, value string) {
	fmt.Printf("%s: %s\n", name, value)
	rows = append(rows, row{name, value})
}

func run(o options) error {
	if err := cuda.Available(); err != nil {
		return err
	}
	cfg, err := model.Preset(o.preset)
	if err != nil {
		return err
	}
	t0 := time.Now()
	w, err := model.InitRandom(cfg, 1)
	if err != nil {
		return err
	}
	maxB := 0
	for _, b := range o.batches {
		maxB = max(maxB, b)
	}
	maxSeqs := max(maxB, o.prompts)
	_, longest := ctxBounds(o.ctx, o.ctxRangeRatio)
	blocksPerSeq := (max(longest+o.steps+16, o.promptLen+o.gen) + o.blockSize - 1) / o.blockSize
	kv := device.KVConfig{NumBlocks: blocksPerSeq * maxSeqs * 2, BlockSizeTokens: o.blockSize}
	d, err := cuda.New(w, kv, cuda.Options{MaxStepTokens: o.maxStepTokens, MaxSeqs: maxSeqs, Float32: o.float32})
	if err != nil {
		return err
	}
	defer d.Close()
	fmt.Printf("device %s; model %s (%d params); setup %.1fs\n", d.GPUName(), o.preset, cfg.NumParameters(), time.Since(t0).Seconds())
	r := rand.New(rand.NewPCG(1, 2))
	params, err := parseSampling(o.sampling)
	if err != nil {
		return err
	}
	nextBlock := int32(0)
	alloc := func(tokens int) []int32 {
		n := (tokens + o.blockSize - 1) / o.blockSize
		t := make([]int32, n)
		for i := range t {
			t[i] = nextBlock % int32(kv.NumBlocks)
			nextBlock++
		}
		return t
	}
	if o.ncuBatches != "" {
		nb, err := parseBatches(o.ncuBatches)
		if err != nil {
			return err
		}
		return ncuSteps(d, r, o, params, alloc, nb)
	}
	if o.persistProbe {
		report, err := d.PersistProbe(20)
		fmt.Print(report)
		if err != nil {
			return err
		}
		report, err = d.FlowProbe(20)
		fmt.Print(report)
		return err
	}
	if o.gemmChain != "" {
		nr, err := parseBatches(o.gemmChain)
		if err != nil {
			return err
		}
		return gemmChain(d, nr)
	}
	if o.chunkProfile != "" {
		return chunkProfile(d, r, o, params, alloc)
	}
	if o.prefillSizes != "" {
		sizes, err := parseBatches(o.prefillSizes)
		if err != nil {
			return err
		}
		return prefillSizes(d, r, params, alloc, sizes)
	}
	defer printTable(d)
	ceil, err := d.MeasureCeilings()
	if err != nil {
		return err
	}
	record("ceiling: D2D copy (read+write)", fmt.Sprintf("%.0f GB/s", ceil.CopyGBs))
	record("ceiling: DRAM read (ceiling.cu)", fmt.Sprintf("%.0f GB/s", ceil.ReadGBs))
	record("ceiling: fp16 GEMM 8192^3 (cuBLASLt)", fmt.Sprintf("%.0f TFLOP/s", ceil.GemmTFLOPs))
	record("driver CUDA version", strconv.Itoa(ceil.DriverCUDA))
	for _, b := range o.batches {
		for _, v := range decodeVariants {
			if o.variants != nil && !o.variants[v.name] {
				continue
			}
			if err := v.set(d); err != nil {
				return err
			}
			ms, err := decodeStep(d, r, b, o, params, alloc, false)
			if err != nil {
				return fmt.Errorf("decode batch %d (%s): %w", b, v.name, err)
			}
			record(fmt.Sprintf("decode step, batch %d, ctx %s, %s (%s)", b, ctxLabel(o.ctx, o.ctxRangeRatio), o.sampling, v.name), fmt.Sprintf("%.3f ms (%.0f tok/s)", ms, float64(b)/ms*1000))
		}
		if err := decodeVariants[0].set(d); err != nil {
			return err
		}
		ms, _, err := decodeOverlapped(d, r, b, o, params, alloc, false)
		if err != nil {
			return fmt.Errorf("decode batch %d (overlapped): %w", b, err)
		}
		record(fmt.Sprintf("decode step, batch %d, ctx %s (graph, overlapped: step period)", b, ctxLabel(o.ctx, o.ctxRangeRatio)), fmt.Sprintf("%.3f ms (%.0f tok/s)", ms, float64(b)/ms*1000))
		if o.gpuSpans { // a run of its own: the span events cost the period a few us
			ms, gpuMs, err := decodeOverlapped(d, r, b, o, params, alloc, true)
			if err != nil {
				return fmt.Errorf("decode batch %d (overlapped, GPU spans): %w", b, err)
			}
			record(fmt.Sprintf("decode step, batch %d, ctx %s (graph, overlapped, span events: GPU time of a step, median / period)", b, ctxLabel(o.ctx, o.ctxRangeRatio)),
				fmt.Sprintf("%.3f / %.3f ms", gpuMs, ms))
		}
	}
	if err := decodeVariants[0].set(d); err != nil {
		return err
	}
	// A prompt whose prefix is cached: most of bench online's requests.
	for _, chunk := range []int{7, 16} {
		for _, rows := range []bool{true, false} {
			name := "one-token rows, graph"
			if !rows {
				name = "prefill kernels, eager"
				d.SetChunkRows(-1)
			}
			ms, err := chunkStep(d, r, o, params, alloc, chunk, chunkCached, nil)
			d.SetChunkRows(0)
			if err != nil {
				return fmt.Errorf("chunk step (%s): %w", name, err)
			}
			record(fmt.Sprintf("prefill step, %d new tokens after %d cached, one sequence (%s)", chunk, chunkCached, name), fmt.Sprintf("%.3f ms", ms))
		}
	}
	if !o.skipOffline {
		for _, mode := range []string{"sync", "overlap", "no graph"} {
			d.SetNoCUDAGraph(mode == "no graph")
			var best float64
			for rep := 0; rep < 2; rep++ { // the first run captures graphs
				tps, err := offline(d, r, o, params, alloc, strings.HasPrefix(mode, "overlap"))
				if err != nil {
					return fmt.Errorf("offline (%s): %w", mode, err)
				}
				best = max(best, tps)
			}
			record(fmt.Sprintf("offline %dx%d->%d, T0.7/p0.9/k50 (%s)", o.prompts, o.promptLen, o.gen, mode), fmt.Sprintf("%.0f output tok/s", best))
		}
		d.SetNoCUDAGraph(false)
	}
	if !o.skipProf {
		// One prefill step of the offline run: its prompts x 256 tokens.
		stepTokens := o.maxStepTokens
		if o.profilePrefillTokens > 0 {
			stepTokens = min(o.profilePrefillTokens, o.maxStepTokens)
		}
		n := max(1, stepTokens/o.promptLen)
		seqs := make([]device.Seq, n)
		for i := range seqs {
			seqs[i] = device.Seq{SeqID: uint64(5000 + i), Tokens: randTokens(r, o.promptLen), BlockTable: alloc(o.promptLen), Sample: true, Params: params, BannedToken: -1}
		}
		if err := prefill(d, seqs, stepTokens); err != nil { // warm: plans for this shape
			return err
		}
		d.EnableOpProfile()
		if err := prefill(d, seqs, stepTokens); err != nil {
			return err
		}
		fmt.Printf("\nper-op GPU time, one prefill step of %d x %d tokens:\n%s", n, o.promptLen, d.OpProfile(1))
		for _, b := range o.batches {
			po := o
			po.steps = 20
			fmt.Printf("\n[%s]", decodeVariants[0].name)
			if _, err := decodeStep(d, r, b, po, params, alloc, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// variant is one configuration of the decode path the benchmark compares.
type variant struct {
	name string
	set  func(d *cuda.Device) error
}

var decodeVariants = []variant{
	{"graph", func(d *cuda.Device) error { d.SetNoCUDAGraph(false); return nil }},
	{"no graph", func(d *cuda.Device) error { d.SetNoCUDAGraph(true); return nil }},
}

// ncuSteps runs, for each batch size, a few eager decode steps and then one
// between ProfilerRange calls: under `ncu --profile-from-start off` exactly
// those steps' kernels are measured, each step starting with encoder_forward.
func ncuSteps(d *cuda.Device, r *rand.Rand, o options, p sample.Params, alloc func(int) []int32, batches []int) error {
	for _, b := range batches {
		for _, v := range []variant{decodeVariants[1]} {
			if err := v.set(d); err != nil {
				return err
			}
			po := o
			po.steps = 1
			po.profileHook = func(on bool) error { return d.ProfilerRange(on) }
			if _, err := decodeStep(d, r, b, po, p, alloc, false); err != nil {
				return err
			}
			fmt.Printf("ncu: profiled one decode step, batch %d, ctx %s (%s kernels)\n", b, ctxLabel(o.ctx, o.ctxRangeRatio), v.name)
		}
	}
	return nil
}

// chunkProfile times a prompt chunk of N new tokens after M cached (-steps
// repeats, chunkStep's median), then its per-op GPU time over as many more.
func chunkProfile(d *cuda.Device, r *rand.Rand, o options, p sample.Params, alloc func(int) []int32) error {
	var n, m int
	if _, err := fmt.Sscanf(o.chunkProfile, "%d@%d", &n, &m); err != nil || n < 1 || m < 0 {
		return fmt.Errorf("-chunk-profile %q: want N@M, N new tokens after M cached", o.chunkProfile)
	}
	ms, err := chunkStep(d, r, o, p, alloc, n, m, nil)
	if err != nil {
		return err
	}
	record(fmt.Sprintf("prefill step, %d new tokens after %d cached, one sequence (eager)", n, m), fmt.Sprintf("%.3f ms", ms))
	if _, err := chunkStep(d, r, o, p, alloc, n, m, d.EnableOpProfile); err != nil {
		return err
	}
	fmt.Printf("\nper-op GPU time, the chunk step:\n%s", d.OpProfile(o.steps+5))
	return nil
}

// prefillSizes times one step per length: a new sequence's whole prompt,
// sampled, on the device as prewarm left it, so that whatever a length
// meets for the first time shows against a repeat of it.
func prefillSizes(d *cuda.Device, r *rand.Rand, p sample.Params, alloc func(int) []int32, sizes []int) error {
	var out []device.Sampled
	for i, n := range sizes {
		s := device.Seq{SeqID: uint64(1<<40 + i), Tokens: randTokens(r, n), BlockTable: alloc(n), Sample: true, Params: p, BannedToken: -1}
		t := time.Now()
		var err error
		if out, err = d.Forward(&device.Batch{Seqs: []device.Seq{s}}, out); err != nil {
			return fmt.Errorf("prefill of %d tokens: %w", n, err)
		}
		fmt.Printf("prefill %d tokens: %.2f ms\n", n, float64(time.Since(t).Microseconds())/1000)
	}
	return nil
}

func printTable(d *cuda.Device) {
	fmt.Printf("\n| measurement (%s) | value |\n|---|---:|\n", d.GPUName())
	for _, rw := range rows {
		fmt.Printf("| %s | %s |\n", rw.name, rw.value)
	}
}

// decodeStep prefills b sequences of decodeStart tokens, then times o.steps decode
// steps (after 5 warm-up steps) and returns the median step time in ms.
//
// With profile, per-op events are recorded (inside the captured graph) and
// the per-op table is printed.
func decodeStep(d *cuda.Device, r *rand.Rand, b int, o options, p sample.Params, alloc func(int) []int32, profile bool) (float64, error) {
	seqs, err := decodeSeqs(d, r, b, o, p, alloc)
	if err != nil {
		return 0, err
	}
	var out []device.Sampled
	var times []float64
	for k := 0; k < o.steps+5; k++ {
		if profile && (k == 2 || k == 5) {
			d.EnableOpProfile() // at 2: start (graphs re-captured with events); at 5: drop the warm-up steps
		}
		batch := decodeBatch(seqs, k, int32(r.IntN(50000)))
		if k == 5 && o.profileHook != nil {
			if err := o.profileHook(true); err != nil {
				return 0, err
			}
		}
		t := time.Now()
		if out, err = d.Forward(batch, out); err != nil {
			return 0, err
		}
		if k >= 5 {
			times = append(times, float64(time.Since(t).Microseconds())/1000)
		}
	}
	if o.profileHook != nil {
		if err := o.profileHook(false); err != nil {
			return 0, err
		}
	}
	sort.Float64s(times)
	if profile {
		fmt.Printf("\nper-op GPU time, decode step (CUDA graph replay), batch %d, ctx %s (median step %.3f ms wall):\n%s", b, ctxLabel(o.ctx, o.ctxRangeRatio),
			times[len(times)/2], d.OpProfile(o.steps))
	}
	return times[len(times)/2], nil
}

// decodeStart is the prompt length decodeSeqs prefills for a sequence of
// context ctx: decode step k sits at position decodeStart + k, so the timed
// steps (k = 5 .. steps + 4) are centred on ctx and the median one attends
// to ctx cached tokens.
func decodeStart(ctx int, o options) int { return max(1, ctx-5-o.steps/2) }

// decodeSeqs prefills b sequences for decodeStep and decodeOverlapped, each
// of its own context (uniform within ctxBounds; all o.ctx without a range):
// the prompt of sequence i is its decodeStart.
func decodeSeqs(d *cuda.Device, r *rand.Rand, b int, o options, p sample.Params, alloc func(int) []int32) ([]device.Seq, error) {
	seqs := make([]device.Seq, b)
	for i := range seqs {
		ctx := o.ctx
		if lo, hi := ctxBounds(o.ctx, o.ctxRangeRatio); hi > lo {
			ctx = lo + r.IntN(hi-lo+1)
		}
		seqs[i] = device.Seq{SeqID: uint64(i), Tokens: randTokens(r, decodeStart(ctx, o)), BlockTable: alloc(ctx + o.steps + 8), Sample: true,
			Params: p, BannedToken: -1}
		seqs[i].Params.Seed = r.Uint64()
	}
	return seqs, prefill(d, seqs, 8192)
}

// decodeBatch is decode step k of seqs (decodeSeqs': each Tokens its
// prompt), every sequence fed token tok (device.FromPrevious: the token the
// previous step sampled, on the GPU).
func decodeBatch(seqs []device.Seq, k int, tok int32) *device.Batch {
	batch := &device.Batch{Seqs: make([]device.Seq, len(seqs))}
	for i := range seqs {
		s := seqs[i]
		s.Tokens = []int32{tok}
		s.StartPos = len(seqs[i].Tokens) + k
		s.SampleIndex = k + 1
		batch.Seqs[i] = s
	}
	return batch
}

// chunkCached is the cached prefix of chunkStep's sequence: bench online's
// prompts (prefixes of one base sequence, 896 tokens at most) mostly find
// all but their last partial block cached.
const chunkCached = 880

// chunkStep prefills cached tokens of one sequence, then times o.steps
// steps (after 5 warm-up steps) that each compute chunk more tokens after
// them and sample (the same positions each time), and returns the median
// step time in ms.
func chunkStep(d *cuda.Device, r *rand.Rand, o options, p sample.Params, alloc func(int) []int32, chunk, cached int, afterPrefix func()) (float64, error) {
	s := device.Seq{SeqID: 1 << 40, Tokens: randTokens(r, cached), BlockTable: alloc(cached + chunk), Sample: true, Params: p, BannedToken: -1}
	if err := prefill(d, []device.Seq{s}, 8192); err != nil {
		return 0, err
	}
	if afterPrefix != nil {
		afterPrefix()
	}
	s.Tokens, s.StartPos = randTokens(r, chunk), cached
	var out []device.Sampled
	var times []float64
	for k := 0; k < o.steps+5; k++ {
		t := time.Now()
		var err error
		if out, err = d.Forward(&device.Batch{Seqs: []device.Seq{s}}, out); err != nil {
			return 0, err
		}
		if k >= 5 {
			times = append(times, float64(time.Since(t).Microseconds())/1000)
		}
	}
	sort.Float64s(times)
	return times[len(times)/2], nil
}

// decodeOverlapped runs o.steps decode steps as the engine does with overlap
// scheduling (step k+1 submitted before step k is collected, fed its tokens
// on the GPU) and returns the mean step period in ms after 5 warm-up steps:
// the decode step time a serving engine sees, host work hidden. With spans
// gpu is the median GPU time of a step (0 otherwise).
func decodeOverlapped(d *cuda.Device, r *rand.Rand, b int, o options, p sample.Params, alloc func(int) []int32, spans bool) (period, gpu float64, err error) {
	seqs, err := decodeSeqs(d, r, b, o, p, alloc)
	if err != nil {
		return 0, 0, err
	}
	if spans {
		// Events around each step, on the stream: what the GPU spends on a
		// step against the period shows the time between steps.
		d.EnableSpans(true)
		defer d.EnableSpans(false)
	}
	if err := d.Submit(decodeBatch(seqs, 0, int32(r.IntN(50000)))); err != nil {
		return 0, 0, err
	}
	var out []device.Sampled
	var steps []phase.DeviceSpan
	var gpuMs []float64
	var start time.Time
	for k := 1; k < o.steps+5; k++ {
		if err := d.Submit(decodeBatch(seqs, k, device.FromPrevious)); err != nil {
			return 0, 0, err
		}
		if out, err = d.Collect(out); err != nil {
			return 0, 0, err
		}
		if k == 5 {
			start = time.Now()
		}
		if steps = d.AppendSpans(steps[:0]); k > 5 && len(steps) > 0 {
			gpuMs = append(gpuMs, float64(steps[0].Dur.Microseconds())/1000)
		}
	}
	if _, err = d.Collect(out); err != nil {
		return 0, 0, err
	}
	if len(gpuMs) > 0 {
		sort.Float64s(gpuMs)
		gpu = gpuMs[len(gpuMs)/2]
	}
	return float64(time.Since(start).Microseconds()) / 1000 / float64(o.steps), gpu, nil
}

// prefill runs the sequences' prompts in steps of at most maxTokens tokens.
func prefill(d *cuda.Device, seqs []device.Seq, maxTokens int) error {
	var out []device.Sampled
	for i := 0; i < len(seqs); {
		var batch device.Batch
		n := 0
		for i < len(seqs) && (n == 0 || n+len(seqs[i].Tokens) <= maxTokens) {
			batch.Seqs = append(batch.Seqs, seqs[i])
			n += len(seqs[i].Tokens)
			i++
		}
		var err error
		if out, err = d.Forward(&batch, out); err != nil {
			return err
		}
	}
	return nil
}

// offline runs o.prompts prompts of o.promptLen tokens to o.gen tokens each
// and returns output tokens per second over the whole run.
func offline(d *cuda.Device, r *rand.Rand, o options, p sample.Params, alloc func(int) []int32, overlap bool) (float64, error) {
	seqs := make([]device.Seq, o.prompts)
	for i := range seqs {
		seqs[i] = device.Seq{SeqID: uint64(1000 + i), Tokens: randTokens(r, o.promptLen), BlockTable: alloc(o.promptLen + o.gen), Sample: true,
			Params: p, BannedToken: -1}
		seqs[i].Params.Seed = r.Uint64()
	}
	start := time.Now()
	last := make([]int32, len(seqs))
	var out []device.Sampled
	for i := 0; i < len(seqs); {
		var batch device.Batch
		n := 0
		first := i
		for i < len(seqs) && (n == 0 || n+o.promptLen <= o.maxStepTokens) {
			batch.Seqs = append(batch.Seqs, seqs[i])
			n += o.promptLen
			i++
		}
		var err error
		if out, err = d.Forward(&batch, out); err != nil {
			return 0, err
		}
		for j := range out {
			last[first+j] = out[j].Token
		}
	}
	step := func(k int, placeholder bool) *device.Batch {
		b := &device.Batch{Seqs: make([]device.Seq, len(seqs))}
		for i := range seqs {
			s := seqs[i]
			s.Tokens = []int32{last[i]}
			if placeholder {
				s.Tokens = []int32{-1}
			}
			s.StartPos = o.promptLen + k - 1
			s.SampleIndex = k
			b.Seqs[i] = s
		}
		return b
	}
	if !overlap {
		for k := 1; k < o.gen; k++ {
			var err error
			if out, err = d.Forward(step(k, false), out); err != nil {
				return 0, err
			}
			for i := range out {
				last[i] = out[i].Token
			}
		}
	} else {
		if err := d.Submit(step(1, false)); err != nil {
			return 0, err
		}
		for k := 2; k <= o.gen; k++ {
			if k < o.gen {
				if err := d.Submit(step(k, true)); err != nil {
					return 0, err
				}
			}
			var err error
			if out, err = d.Collect(out); err != nil {
				return 0, err
			}
			for i := range out {
				last[i] = out[i].Token
			}
		}
	}
	return float64(o.prompts*o.gen) / time.Since(start).Seconds(), nil
}

func randTokens(r *rand.Rand, n int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = int32(r.IntN(50000))
	}
	return t
}

// gemmChain prints the projection diagnostics: L2's per-SM feed rate for a
// matrix every block reads, the cost of a launch of a projection's shape in
// a graph, and the layer projections back to back through each
// implementation at each row count.
func gemmChain(d *cuda.Device, rowCounts []int) error {
	for _, blocks := range []int{72, 132} {
		for _, kb := range []int{96, 192, 768} {
			gbs, err := d.L2BroadcastGBs(blocks, kb*1024)
			if err != nil {
				return err
			}
			fmt.Printf("L2 broadcast: %d blocks each reading the same %d KiB: %.1f GB/s per block (%.0f GB/s in all)\n", blocks, kb, gbs, gbs*float64(blocks))
		}
	}
	for _, smem := range []int{0, 64 << 10, 196 << 10} {
		for _, ln := range []bool{false, true} {
			us, err := d.LaunchCost(72, 1, smem, 128, ln)
			if err != nil {
				return err
			}
			fmt.Printf("launch cost in a graph: 72 blocks x 128 threads, %d KiB shared memory, after a LayerNorm (128 rows) %v: %.2f us\n", smem>>10, ln, us)
		}
	}
	for _, cluster := range []int{2, 4, 8} {
		for _, smem := range []int{0, 196 << 10} {
			us, err := d.LaunchCost(36, cluster, smem, 128, false)
			if err != nil {
				return err
			}
			plain, err := d.LaunchCost(36*cluster, 1, smem, 128, false)
			if err != nil {
				return err
			}
			record(fmt.Sprintf("launch cost in a graph: 36 clusters of %d blocks x 128 threads, %d KiB shared memory", cluster, smem>>10),
				fmt.Sprintf("%.2f us (the same %d blocks without clusters %.2f us)", us, 36*cluster, plain))
		}
	}
	for _, rows := range rowCounts {
		for _, impl := range []string{"cublaslt", "skinny"} {
			us, _, err := d.GemmChain(rows, impl, cuda.ChainOptions{LN: true, OneLayer: true})
			if err != nil {
				return fmt.Errorf("gemm chain %s, %d rows, one layer's weights: %w", impl, rows, err)
			}
			record(fmt.Sprintf("projections back to back, %d rows, LayerNorm kernels true, %s, layer 0's weights every layer (L2-resident)", rows, impl), fmt.Sprintf("%.2f us per projection", us))
		}
		for _, kind := range cuda.ProjectionKinds {
			for _, impl := range cuda.GemmChainImpls() {
				us, _, err := d.GemmChain(rows, impl, cuda.ChainOptions{Only: kind})
				if err != nil {
					return fmt.Errorf("gemm chain %s, %d rows, %s only: %w", impl, rows, kind, err)
				}
				record(fmt.Sprintf("%s back to back, %d rows, %s", kind, rows, impl), fmt.Sprintf("%.2f us each", us))
			}
		}
		for _, ln := range []bool{false, true} {
			for _, impl := range cuda.GemmChainImpls() {
				us, diff, err := d.GemmChain(rows, impl, cuda.ChainOptions{LN: ln})
				if err != nil {
					return fmt.Errorf("gemm chain %s, %d rows: %w", impl, rows, err)
				}
				record(fmt.Sprintf("projections back to back, %d rows, LayerNorm kernels %v, %s", rows, ln, impl), fmt.Sprintf("%.2f us per projection (rel diff from cuBLASLt %.1e)", us, diff))
			}
		}
	}
	printTable(d)
	return nil
}
