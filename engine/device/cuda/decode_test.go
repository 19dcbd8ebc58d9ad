package cuda

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/roseinfer/roseinfer/engine/device"
	"github.com/roseinfer/roseinfer/engine/model"
	"github.com/roseinfer/roseinfer/engine/sample"
)

// TestWideDecodeLogits checks decode steps large enough to split their keys
// through the 80-register kernel (decodeSplits' r4 path), or to run their
// projections through gemm_wg.cu, against the fp32 reference: S sequences of
// different lengths decode 3 steps padded to a graph (the first runs
// eagerly, the next are captured and replayed), with and without those
// kernels. Every row's logits must match.
func TestWideDecodeLogits(t *testing.T) {
	w, err := model.InitRandom(smallConfig, 41)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		force    forcedPaths
		S, graph int
	}{
		{forcedPaths{}, 72, 80},
		{forcedPaths{cuBLASLt: true}, 72, 80}, // the projections of GPUs without sm_90a
		{forcedPaths{noPair: true}, 72, 80},   // attproj and fc as two grids, as under MPS partitioning
		{forcedPaths{}, 44, 48},
		{forcedPaths{cuBLASLt: true}, 44, 48},
	} {
		name := fmt.Sprintf("forced %+v, %d sequences", c.force, c.S)
		d := newTestDevice(t, w, Options{MaxStepTokens: 4096, MaxSeqs: 128, force: c.force})
		S := c.S
		nsplit, r4 := d.decodeSplits(c.graph)
		if c.S == 72 && !r4 {
			t.Fatalf("%s: %d splits, 80-register kernel %v", name, nsplit, r4)
		}
		wg := d.useWG(c.graph, w.Config.Channels, gemvOut16Bias)
		if want := !c.force.cuBLASLt && kernelArch(wgFile, d.g.arch, d.g.nv.major) != ""; wg != want {
			t.Fatalf("%s: gemm_wg %v at %d rows, want %v", name, wg, c.graph, want)
		}
		// fcproj (K = 4C = 1024 here: two slices) goes through gemm_wg too.
		if split := d.useWG(c.graph, 4*w.Config.Channels, gemvResidual); split != wg {
			t.Fatalf("%s: fcproj through gemm_wg %v at %d rows", name, split, c.graph)
		}
		// The LayerNorm before fc folds into attproj and fc wherever gemm_wg takes them.
		fold := d.lnFold(c.graph)
		if fold != wg {
			t.Fatalf("%s: LayerNorm fold %v at %d rows", name, fold, c.graph)
		}
		// Folded, attproj and fc run as one grid (here every tile is 16 columns wide) unless forced apart.
		if _, _, pair := d.pairShape(c.graph); pair != (fold && !c.force.noPair) {
			t.Fatalf("%s: gemm_wg_pair %v at %d rows", name, pair, c.graph)
		}
		t.Logf("%s: %d key splits, 80-register kernel %v, gemm_wg %v", name, nsplit, r4, wg)
		r := rand.New(rand.NewPCG(42, 43))
		V, B := w.Config.VocabSize, d.kv.BlockSizeTokens
		greedy := sample.Params{Temperature: 0, TopP: 1}
		var alloc blockAlloc
		refs := make([]*refSeq, S)
		tables := make([][]int32, S)
		pos := make([]int, S)
		var batch device.Batch
		for i := range S {
			prompt := randTokens(r, 3+r.IntN(45), V)
			refs[i] = newRefSeq(w.Config.NumLayers)
			refForward(w, refs[i], prompt, 0)
			tables[i] = alloc.grow(nil, len(prompt), B)
			pos[i] = len(prompt)
			batch.Seqs = append(batch.Seqs, device.Seq{SeqID: uint64(i + 1), Tokens: prompt, BlockTable: tables[i], Sample: true, Params: greedy, BannedToken: -1})
		}
		out, err := d.Forward(&batch, nil)
		if err != nil {
			t.Fatal(err)
		}
		for step := 0; step < 3; step++ {
			batch.Seqs = batch.Seqs[:0]
			want := make([][]float32, S)
			for i := range S {
				tok := out[i].Token
				tables[i] = alloc.grow(tables[i], pos[i]+1, B)
				batch.Seqs = append(batch.Seqs, device.Seq{SeqID: uint64(i + 1), Tokens: []int32{tok}, StartPos: pos[i], BlockTable: append([]int32{}, tables[i]...),
					Sample: true, Params: greedy, BannedToken: -1})
				want[i] = refForward(w, refs[i], []int32{tok}, pos[i])
				pos[i]++
			}
			if out, err = d.Forward(&batch, out); err != nil {
				t.Fatalf("decode step %d: %v", step, err)
			}
			plan := &d.queue.stage[(d.queue.next+len(d.queue.stage)-1)%len(d.queue.stage)].plan
			if plan.graphBatch != c.graph {
				t.Fatalf("%s, decode step %d: graph batch %d, want %d", name, step, plan.graphBatch, c.graph)
			}
			rowOf := d.lastRowOfSeq()
			got := d.lastLogits(t, plan.graphBatch)
			worst := 0.0
			for i := range S {
				e := relErr(got[rowOf[i]], want[i])
				if e > 1e-2 {
					t.Errorf("%s, decode step %d seq %d (position %d): logits rel err %.2e", name, step, i+1, pos[i]-1, e)
				}
				worst = max(worst, e)
				if tok := argmaxF32(got[rowOf[i]]); out[i].Token != tok {
					t.Errorf("%s, decode step %d seq %d: greedy token %d, argmax of its logits %d", name, step, i+1, out[i].Token, tok)
				}
			}
			t.Logf("%s, decode step %d: worst logits rel err %.2e over %d rows", name, step, worst, S)
		}
	}
}
