package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/roseinfer/roseinfer/engine/device"
	"github.com/roseinfer/roseinfer/engine/device/cpu"
	"github.com/roseinfer/roseinfer/engine/model"
	"github.com/roseinfer/roseinfer/engine/sample"
)

// rotaryConfig is a small Qwen3 of the shape the rotary kernels take (head
// size 128, two query heads a KV head) with the real vocabulary.
var rotaryConfig = model.Config{Family: "qwen3", NumLayers: 2, NumHeads: 4, NumKVHeads: 2, HeadDim: 128, Channels: 256,
	Intermediate: 512, MaxSeqLen: 512, VocabSize: 151936, LayerNormEpsilon: 1e-6, EOSTokenID: 151645, RopeTheta: 1e6}

// rotaryWeights returns random weights of c stored in bf16 and read back,
// as init-model's default checkpoints are: both devices then compute with
// the same parameters.
func rotaryTestWeights(t *testing.T, c model.Config, seed uint64) *model.Weights {
	t.Helper()
	w, err := model.InitRandom(c, seed)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := model.WriteCheckpoint(dir, c, w, model.BF16); err != nil {
		t.Fatal(err)
	}
	if w, err = model.LoadCheckpoint(dir); err != nil {
		t.Fatal(err)
	}
	return w
}

// rotaryLogitsBound is the relative error (||gpu - cpu|| / ||cpu||) allowed
// between the GPU's logits (bf16 activations, fp32 accumulation and
// residual) and the CPU device's fp32 ones on the same bf16 weights.
const rotaryLogitsBound = 1e-2 // measured 3.4e-3 to 5.1e-3 on the H100

// rotaryF32LogitsBound is the same bound for the fp32 mode (Options.Float32),
// where only the order of fp32 sums differs between the devices.
const rotaryF32LogitsBound = 1e-5 // measured 6e-7 to 8.5e-7 on the H100

// TestRotaryLogitsVsCPU runs the same steps on the CUDA device and on the
// CPU device (fp32, held to HF transformers by its golden test) and
// compares the logits of every sampled row: prompts longer than a chunk
// row (eager steps), a chunked prefill (40 tokens, then 10), a prefix-cache
// hit on another sequence's two blocks, one-token prompts, short chunks
// laid out as rows (captured graphs), and decode tokens.
func TestRotaryLogitsVsCPU(t *testing.T) {
	if err := Available(); err != nil {
		t.Skipf("no CUDA here: %v", err)
	}
	w := rotaryTestWeights(t, rotaryConfig, 31)
	// Steps of at most 16 rows (the second to the last) run q3_gemv.cu's
	// projections unless cuBLASLt is forced; on Hopper the first (78 rows)
	// runs o_proj and down_proj through q3_wg.cu, and all four with
	// rotaryWGOneSliceRows forced to 128.
	for _, o := range []Options{{}, {NoCUDAGraph: true}, {ChunkRows: -1}, {force: forcedPaths{noPDL: true}},
		{force: forcedPaths{cuBLASLt: true}}, {force: forcedPaths{rotaryWGOneSliceRows: 128}},
		{force: forcedPaths{noRopeInAttention: true}}, {force: forcedPaths{noPrefillWG: true}},
		{force: forcedPaths{kvPrefetchMB: -1}}, {force: forcedPaths{kvPrefetchMB: 1, kvPrefetchAnyRows: true}},
		{force: forcedPaths{normRowsMin: 1}},
		{force: forcedPaths{gemmWSMinRows: 1, noRotaryWG: true}}, {force: forcedPaths{gemmWSMinRows: 1, noRotaryWG: true, gemmWSCluster: 1}},
		{force: forcedPaths{gemmWSMinRows: 1}}} {
		o.MaxStepTokens, o.MaxSeqs = 1024, 64
		t.Run(fmt.Sprintf("noCUDAGraph=%v_chunkRows=%d_noPDL=%v_cuBLASLt=%v_wgOneSlice=%d_noRopeInAttention=%v_noPrefillWG=%v_kvPrefetch=%d,%v_normRowsMin=%d_gemmWS=%d,%d", o.NoCUDAGraph,
			o.ChunkRows, o.force.noPDL, o.force.cuBLASLt, o.force.rotaryWGOneSliceRows, o.force.noRopeInAttention,
			o.force.noPrefillWG, o.force.kvPrefetchMB, o.force.kvPrefetchAnyRows, o.force.normRowsMin, o.force.gemmWSMinRows,
			o.force.gemmWSCluster), func(t *testing.T) {
			d := newTestDevice(t, w, o)
			if wgBuilt := kernelArch(q3WGFile, d.g.arch, d.g.nv.major) != ""; wgBuilt && !o.force.cuBLASLt && !o.force.noRotaryWG && !d.q3.wg.ok {
				t.Fatal("q3_wg.cu was built but its 17-128-row steps are off") // the first step has 78 rows
			}
			wantWG := kernelArch(q3AttnWGFile, d.g.arch, d.g.nv.major) != "" && !o.force.noPrefillWG
			if got := d.q3.k.attnPrefill.name == q3AttnWGKernel; got != wantWG {
				t.Fatalf("prompt chunks' attention through %s, want q3_attn_wg.cu's: %v", d.q3.k.attnPrefill.name, wantWG)
			}
			checkRotarySteps(t, d, w, rotaryLogitsBound)
			// The decode steps here have at most 64 rows: the KV prefetch
			// runs in them only where every row count takes it (on Hopper).
			if want := d.g.ccMajor >= 9 && o.force.kvPrefetchAnyRows; want && d.q3.pf.forks == 0 {
				t.Fatal("no KV prefetch launched in the decode steps")
			} else if o.force.kvPrefetchMB < 0 && d.q3.pf.forks != 0 {
				t.Fatalf("%d KV prefetch launches with it off", d.q3.pf.forks)
			}
			// The steps here have at most 78 rows: q3_gemm_ws.cu takes their
			// gate|up and q|k|v only where a test lowers its threshold (on
			// sm_90a).
			wsBuilt := kernelArch(q3GemmWSFile, d.g.arch, d.g.nv.major) != ""
			if got, want := d.q3.wsLaunches > 0, wsBuilt && o.force.gemmWSMinRows > 0; got != want {
				t.Fatalf("%d q3_gemm_ws.cu gate|up launches, want some: %v", d.q3.wsLaunches, want)
			}
			if got, want := d.q3.wsQKVLaunches > 0, wsBuilt && o.force.gemmWSMinRows > 0; got != want {
				t.Fatalf("%d q3_gemm_ws.cu q|k|v launches, want some: %v", d.q3.wsQKVLaunches, want)
			}
		})
	}
	// The fp32 mode: q3_f32.cu's kernels and cuBLASLt's fp32 GEMMs, in
	// graphs and eagerly, chunks as rows and not.
	for _, o := range []Options{{Float32: true}, {Float32: true, NoCUDAGraph: true, ChunkRows: -1}} {
		o.MaxStepTokens, o.MaxSeqs = 1024, 64
		t.Run(fmt.Sprintf("float32_noCUDAGraph=%v_chunkRows=%d", o.NoCUDAGraph, o.ChunkRows), func(t *testing.T) {
			checkRotarySteps(t, newTestDevice(t, w, o), w, rotaryF32LogitsBound)
		})
	}
	// Other group sizes than the preset's 2 query heads a KV head: 1, and 5
	// (not a power of two, as Qwen3-14B's 40 over 8).
	for _, heads := range [][2]int{{2, 2}, {10, 2}} {
		c := rotaryConfig
		c.NumHeads, c.NumKVHeads = heads[0], heads[1]
		t.Run(fmt.Sprintf("heads=%d_kvheads=%d", heads[0], heads[1]), func(t *testing.T) {
			w := rotaryTestWeights(t, c, 35)
			checkRotarySteps(t, newTestDevice(t, w, Options{MaxStepTokens: 1024, MaxSeqs: 64}), w, rotaryLogitsBound)
			checkRotarySteps(t, newTestDevice(t, w, Options{MaxStepTokens: 1024, MaxSeqs: 64, Float32: true}), w, rotaryF32LogitsBound)
		})
	}
}

// checkRotarySteps runs six mixed steps (whole and chunked prompts, a
// prefix hit, one-token prompts, decode tokens) on d and on the CPU device
// and compares every sampled row's logits: a relative error of at most
// bound, and d's greedy token the argmax of its own logits.
func checkRotarySteps(t *testing.T, d *Device, w *model.Weights, bound float64) {
	kv := device.KVConfig{NumBlocks: 512, BlockSizeTokens: 16}
	cd, err := cpu.New(w, kv, cpu.Options{MaxBatchTokens: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer cd.Close()
	r := rand.New(rand.NewPCG(32, 33))
	V, B := w.Config.VocabSize, kv.BlockSizeTokens
	greedy := sample.Params{Temperature: 0, TopP: 1}
	type seqState struct {
		id     uint64
		prompt []int32
		done   int
		table  []int32
		last   int32
	}
	var alloc blockAlloc
	mk := func(id uint64, n int) *seqState { return &seqState{id: id, prompt: randTokens(r, n, V)} }
	A, Bs, Cs, E := mk(1, 37), mk(2, 50), mk(3, 1), mk(5, 12)
	D := mk(4, 37) // shares A's first two blocks: a prefix hit
	copy(D.prompt, A.prompt[:32])
	steps := [][]struct {
		s     *seqState
		chunk int // prompt tokens this step (0 = decode the last sample)
	}{
		{{A, 37}, {Bs, 40}, {Cs, 1}},
		{{A, 0}, {Bs, 10}, {Cs, 0}},
		{{A, 0}, {Bs, 0}, {Cs, 0}, {D, 5}},
		{{A, 0}, {Bs, 0}, {Cs, 0}, {D, 0}, {E, 12}},
		{{D, 0}, {A, 0}, {E, 0}},
		{{D, 0}, {A, 0}, {E, 0}, {Bs, 0}},
	}
	var out []device.Sampled
	var ref []float32
	for si, step := range steps {
		var batch device.Batch
		for _, e := range step {
			s := e.s
			var toks []int32
			switch {
			case e.chunk > 0 && s == D && s.done == 0:
				s.table, s.done = append([]int32{}, A.table[:2]...), 32
				toks = s.prompt[32:]
			case e.chunk > 0:
				toks = s.prompt[s.done : s.done+e.chunk]
			default:
				toks = []int32{s.last}
			}
			start := s.done
			s.table = alloc.grow(s.table, start+len(toks), B)
			batch.Seqs = append(batch.Seqs, device.Seq{SeqID: s.id, Tokens: toks, StartPos: start, BlockTable: append([]int32{}, s.table...),
				Sample: e.chunk == 0 || start+len(toks) == len(s.prompt), Params: greedy, BannedToken: -1})
			s.done += len(toks)
		}
		if ref, err = cd.ForwardLogits(&batch, ref); err != nil {
			t.Fatalf("step %d (CPU): %v", si, err)
		}
		if out, err = d.Forward(&batch, out); err != nil {
			t.Fatalf("step %d: %v", si, err)
		}
		rowOf := d.lastRowOfSeq()
		got := d.lastLogits(t, slices.Max(rowOf)+1)
		k := 0
		for i, e := range step {
			seq := &batch.Seqs[i]
			if !seq.Sample {
				if out[i].Token != -1 {
					t.Errorf("step %d seq %d: token %d for a non-sampling chunk", si, seq.SeqID, out[i].Token)
				}
				continue
			}
			want := ref[k*V : (k+1)*V]
			k++
			lg := got[rowOf[i]]
			rel := relErr(lg, want)
			t.Logf("step %d seq %d (%d tokens at %d): logits rel err %.2e", si, seq.SeqID, len(seq.Tokens), seq.StartPos, rel)
			if rel > bound {
				t.Errorf("step %d seq %d: logits rel err %.2e > %.0e", si, seq.SeqID, rel, bound)
			}
			if err := checkGreedyToken(lg, out[i].Token, d.logitsType(len(got))); err != nil {
				t.Errorf("step %d seq %d: %v", si, seq.SeqID, err)
			}
			e.s.last = out[i].Token
		}
	}
}

// TestRotaryGreedyVsCPU: 32 prompts, 64 greedy tokens each, on the CUDA
// device (one prefill step, then decode graphs; and with overlap
// scheduling) and on the CPU device; at least 95% of tokens must come
// before their prompt's first divergence (99% in the fp32 mode), and
// overlap must give the same tokens as the plain loop.
func TestRotaryGreedyVsCPU(t *testing.T) {
	if err := Available(); err != nil {
		t.Skipf("no CUDA here: %v", err)
	}
	w := rotaryTestWeights(t, rotaryConfig, 41)
	r := rand.New(rand.NewPCG(42, 43))
	const P, G = 32, 64
	prompts := make([][]int32, P)
	for i := range prompts {
		prompts[i] = randTokens(r, 5+r.IntN(60), w.Config.VocabSize)
	}
	kv := device.KVConfig{NumBlocks: 512, BlockSizeTokens: 16}
	cd, err := cpu.New(w, kv, cpu.Options{MaxBatchTokens: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer cd.Close()
	ref := greedyRun(t, cd, kv.BlockSizeTokens, prompts, G, false)
	for _, f32 := range []bool{false, true} {
		t.Run(fmt.Sprintf("float32=%v", f32), func(t *testing.T) {
			d := newTestDevice(t, w, Options{MaxStepTokens: 4096, MaxSeqs: 64, Float32: f32})
			gpu := greedyGPU(t, d, prompts, G, false)
			bar := 0.95
			if f32 {
				bar = 0.99
			}
			checkGreedyAgreementMin(t, prompts, gpu, ref, "the CPU device", bar)
			overlap := greedyGPU(t, d, prompts, G, true)
			for i := range prompts {
				if !slices.Equal(overlap[i], gpu[i]) {
					t.Errorf("prompt %d: overlap scheduling gave %v, the plain loop %v", i, overlap[i], gpu[i])
				}
			}
		})
	}
}

// checkGreedyToken holds tok to the greedy rule over the logits lg as read
// back (typ, logitsType): the argmax of fp32 logits; over bf16 logits the
// sampler recomputes in fp32 the ids within two bf16 units of the maximum
// (dot_refine in sample.cuh), so tok must be one of those.
func checkGreedyToken(lg []float32, tok int32, typ int) error {
	a := argmaxF32(lg)
	if typ != dataR16BF {
		if tok != a {
			return fmt.Errorf("greedy token %d, argmax of its logits %d", tok, a)
		}
		return nil
	}
	m := float64(lg[a])
	_, e := math.Frexp(math.Abs(m)) // |m| in [2^(e-1), 2^e): a bf16 unit there is 2^(e-8)
	slack := 2 * math.Ldexp(1, e-8)
	if tok < 0 || int(tok) >= len(lg) || float64(lg[tok]) < m-slack {
		return fmt.Errorf("greedy token %d is not within %.3g of the bf16 maximum %.4g (id %d)", tok, slack, m, a)
	}
	return nil
}
