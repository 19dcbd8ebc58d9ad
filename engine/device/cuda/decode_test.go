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
		warps, wgRows, S, graph int
		noSplitK                bool // Options.NoWgmmaSplitK
		noLNFold                bool // Options.NoWgmmaLNFold
		noPair                  bool // Options.NoWgmmaPair
	}{
		{0, 0, 72, 80, false, false, false},
		{-1, 0, 72, 80, false, false, false},
		{0, 64, 72, 80, false, false, false}, // cuBLASLt; by default gemm_wg over two row tiles, the second mostly padding
		{0, 0, 72, 80, true, false, false},
		{0, 0, 72, 80, false, true, false},
		{0, 0, 72, 80, false, false, true},
		{0, 0, 44, 48, false, false, false},
		{0, -1, 44, 48, false, false, false},
	} {
		name := fmt.Sprintf("DecodeWarpsPerSM %d, WgmmaGemmRows %d, NoWgmmaSplitK %v, NoWgmmaLNFold %v, NoWgmmaPair %v, %d sequences", c.warps,
			c.wgRows, c.noSplitK, c.noLNFold, c.noPair, c.S)
		d := newTestDevice(t, w, Options{MaxStepTokens: 4096, MaxSeqs: 128, DecodeWarpsPerSM: c.warps, WgmmaGemmRows: c.wgRows,
			NoWgmmaSplitK: c.noSplitK, NoWgmmaLNFold: c.noLNFold, NoWgmmaPair: c.noPair})
		S := c.S
		nsplit, r4 := d.decodeSplits(c.graph)
		if c.S == 72 && r4 != (c.warps == 0) {
			t.Fatalf("%s: %d splits, 80-register kernel %v", name, nsplit, r4)
		}
		wg := d.useWG(c.graph, w.Config.Channels, gemvOut16Bias)
		if want := c.graph <= d.opts.WgmmaGemmRows && kernelArch(wgFile, d.g.arch, d.g.nv.major) != ""; wg != want {
			t.Fatalf("%s: gemm_wg %v at %d rows, want %v", name, wg, c.graph, want)
		}
		// fcproj (K = 4C = 1024 here: two slices) goes through gemm_wg too unless NoWgmmaSplitK.
		if split := d.useWG(c.graph, 4*w.Config.Channels, gemvResidual); split != (wg && !c.noSplitK) {
			t.Fatalf("%s: fcproj through gemm_wg %v at %d rows", name, split, c.graph)
		}
		// The LayerNorm before fc folds into attproj and fc wherever gemm_wg takes them, unless NoWgmmaLNFold.
		fold := d.lnFold(c.graph)
		if fold != (wg && !c.noLNFold) {
			t.Fatalf("%s: LayerNorm fold %v at %d rows", name, fold, c.graph)
		}
		// Folded, attproj and fc run as one grid (here every tile is 16 columns wide) unless NoWgmmaPair.
		if _, _, pair := d.pairShape(c.graph); pair != (fold && !c.noPair) {
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
			plan := &d.stage[(d.next+len(d.stage)-1)%len(d.stage)].plan
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
