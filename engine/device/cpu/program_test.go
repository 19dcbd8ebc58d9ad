package cpu

import (
	"slices"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/engine/device"
	"github.com/roseinfer/roseinfer/engine/model"
	"github.com/roseinfer/roseinfer/engine/model/arch"
)

// fuseEpilogues rewrites a Program's layer ops the way a fusing device
// would read them: a linear followed by GELU in place takes the GELU as its
// epilogue, and a linear into a buffer that a residual add then reads
// accumulates into the residual stream itself.
func fuseEpilogues(ops []arch.Op) []arch.Op {
	var fused []arch.Op
	for i := 0; i < len(ops); i++ {
		o := ops[i]
		if o.Kind == arch.OpLinear && i+1 < len(ops) {
			next := ops[i+1]
			switch {
			case next.Kind == arch.OpGELU && next.In == o.Out && next.Out == o.Out:
				o.Act = arch.ActGELU
				i++
			case next.Kind == arch.OpResidual && next.In == o.Out:
				o.Out, o.Accumulate = next.Out, true
				i++
			}
		}
		fused = append(fused, o)
	}
	return fused
}

// TestFusedEpiloguesMatch runs GPT-2's Program with its GELUs and residual
// adds folded into the linears: the logits must equal, bit for bit, those
// of the Program as the family lists it, since the epilogues do the same
// arithmetic in the same order.
func TestFusedEpiloguesMatch(t *testing.T) {
	w, err := model.InitRandom(smallConfig, 13)
	if err != nil {
		t.Fatal(err)
	}
	fam, _ := model.Lookup(w.Config.Family)
	prog := fam.Program(w.Config)
	fusedProg := prog
	fusedProg.Layer = fuseEpilogues(prog.Layer)
	if got, want := len(fusedProg.Layer), len(prog.Layer)-3; got != want {
		t.Fatalf("fused %d layer ops, want %d (one GELU and two residual adds folded)", got, want)
	}
	prompt := []int32{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9}
	var rows [2][][]float32
	for i, p := range []arch.Program{prog, fusedProg} {
		kv := device.KVConfig{NumBlocks: (smallConfig.MaxSeqLen + testBlockSize - 1) / testBlockSize, BlockSizeTokens: testBlockSize}
		d, err := newDevice(w, p, kv, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		rows[i], _ = runSingle(t, d, blockTable(smallConfig, 0, 1), prompt, []int{6, len(prompt) - 1}, 4)
	}
	for r := range rows[0] {
		if !slices.Equal(rows[0][r], rows[1][r]) {
			t.Fatalf("row %d: fused logits differ from the listed Program's", r)
		}
	}
}

// TestProgramRejected: a Program the device cannot run fails at New,
// naming the op, and never in the forward.
func TestProgramRejected(t *testing.T) {
	w, err := model.InitRandom(smallConfig, 14)
	if err != nil {
		t.Fatal(err)
	}
	fam, _ := model.Lookup(w.Config.Family)
	for _, tc := range []struct {
		name    string
		edit    func(p *arch.Program)
		wantErr string
	}{
		{"unknown kind", func(p *arch.Program) { p.Layer[0].Kind = 99 }, "layer op 0 (OpKind(99)): op kind OpKind(99) is not implemented"},
		// Grouped heads over a qkv row laid out for as many KV heads as query heads.
		{"attention row mismatch", func(p *arch.Program) { p.Layer[2].NumKVHeads = 2 }, "a (NH+2·NKV)·HS qkv row"},
		{"q norm without k norm", func(p *arch.Program) { p.Layer[2].QNorm, p.Layer[2].Eps = "ln1w", 1e-5 }, "q and k norms come together"},
		{"rmsnorm with a bias", func(p *arch.Program) { p.Layer[0].Kind = arch.OpRMSNorm }, "an rmsnorm has no bias"},
		{"swiglu width", func(p *arch.Program) { p.Layer[7].Kind = arch.OpSwiGLU }, "not 2 x"},
		{"missing tensor", func(p *arch.Program) { p.Layer[1].Weight = "nope" }, `no tensor "nope"`},
		{"wrong width", func(p *arch.Program) { p.Layer[1].OutDim++ }, "per-layer tensor \"qkvw\""},
		{"attention in the head", func(p *arch.Program) { p.Head = append([]arch.Op{p.Layer[2]}, p.Head...) }, "head op 0"},
		{"no LM head", func(p *arch.Program) { p.Head = p.Head[:1] }, "must end with a linear op"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := fam.Program(w.Config)
			p.Layer, p.Head = slices.Clone(p.Layer), slices.Clone(p.Head)
			tc.edit(&p)
			d, err := newDevice(w, p, device.KVConfig{NumBlocks: 8, BlockSizeTokens: testBlockSize}, Options{})
			if err == nil {
				d.Close()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
