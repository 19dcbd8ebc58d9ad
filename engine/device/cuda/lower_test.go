package cuda

import (
	"slices"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/engine/model"
	"github.com/roseinfer/roseinfer/engine/model/arch"
)

// The lowering runs on the host: these tests need no GPU.

// presetProgram is the Program a model preset's family lists for it.
func presetProgram(t *testing.T, preset string) (arch.Program, arch.Config) {
	t.Helper()
	c, err := model.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	f, err := arch.Lookup(c.Family)
	if err != nil {
		t.Fatal(err)
	}
	return f.Program(c), c
}

// TestLowerGPT2 checks that GPT-2's Program, as its family lists it
// (unfused, llm.c's order), lowers onto the fused step with every tensor
// in its place, and that every name it gives is a tensor of the weights.
func TestLowerGPT2(t *testing.T) {
	p, c := presetProgram(t, "tiny")
	lp, err := lowerProgram(p, c)
	if err != nil {
		t.Fatal(err)
	}
	w, err := model.NewWeights(c)
	if err != nil {
		t.Fatal(err)
	}
	ly := lp.layer
	names := []string{lp.tokenEmbedding, lp.positionEmbedding, lp.lnfW, lp.lnfB, ly.ln1W, ly.ln1B, ly.qkvW, ly.qkvB,
		ly.attProjW, ly.attProjB, ly.ln2W, ly.ln2B, ly.fcW, ly.fcB, ly.fcProjW, ly.fcProjB}
	for _, n := range names {
		if _, err := w.Tensor(n); err != nil {
			t.Errorf("lowered name %q: %v", n, err)
		}
	}
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	if len(slices.Compact(sorted)) != len(names) {
		t.Errorf("two fused steps read the same tensor: %v", names)
	}
	// Each projection gets the matrix of the op in that place of the layer.
	linears := []string{}
	for _, o := range p.Layer {
		if o.Kind == arch.OpLinear {
			linears = append(linears, o.Weight)
		}
	}
	if got := []string{ly.qkvW, ly.attProjW, ly.fcW, ly.fcProjW}; !slices.Equal(got, linears) {
		t.Errorf("projections %v, want the layer's linears in order %v", got, linears)
	}
	if lp.eps != c.LayerNormEpsilon {
		t.Errorf("eps %g, want %g", lp.eps, c.LayerNormEpsilon)
	}
}

// TestLowerFusedForm: a Program that lists the epilogues already fused
// lowers to the same step.
func TestLowerFusedForm(t *testing.T) {
	p, c := presetProgram(t, "tiny")
	want, err := lowerProgram(p, c)
	if err != nil {
		t.Fatal(err)
	}
	fused := p
	fused.Layer = fuseEpilogues(p.Layer)
	if len(fused.Layer) != 7 {
		t.Fatalf("fused layer has %d ops, want 7", len(fused.Layer))
	}
	got, err := lowerProgram(fused, c)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("fused form lowers to %+v, want %+v", got, want)
	}
}

// TestLowerRejects: Programs the kernels do not implement fail with a
// message naming what is missing, never lower to the wrong math.
func TestLowerRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(p *arch.Program)
		want string
	}{
		{"no GELU", func(p *arch.Program) {
			p.Layer = slices.DeleteFunc(slices.Clone(p.Layer), func(o arch.Op) bool { return o.Kind == arch.OpGELU })
		}, "layer op 5"},
		{"untied LM head", func(p *arch.Program) {
			p.Head = slices.Clone(p.Head)
			p.Head[len(p.Head)-1].Weight = "lm_head.weight"
		}, "tied embeddings only"},
		{"grouped-query attention", func(p *arch.Program) {
			p.Layer = slices.Clone(p.Layer)
			for i := range p.Layer {
				if p.Layer[i].Kind == arch.OpAttention {
					p.Layer[i].NumKVHeads = 0
				}
			}
		}, "multi-head attention"},
		{"no position table", func(p *arch.Program) {
			p.Embed = slices.Clone(p.Embed)
			p.Embed[0].Pos = ""
		}, "embedding op 0"},
		{"bias-free projection", func(p *arch.Program) {
			p.Layer = slices.Clone(p.Layer)
			p.Layer[1].Bias = ""
		}, "layer op 1"},
		{"other epsilon", func(p *arch.Program) {
			p.Head = slices.Clone(p.Head)
			p.Head[0].Eps *= 2
		}, "epsilon"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, c := presetProgram(t, "tiny")
			tc.edit(&p)
			_, err := lowerProgram(p, c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestLowerRotary: Qwen3's Program lowers onto the rotary block with the
// tensors of each fused step, and the shapes and forms its kernels do not
// implement fail by name.
func TestLowerRotary(t *testing.T) {
	p, c := presetProgram(t, "qwen3-0.6b")
	if !isRotary(p) {
		t.Fatal("Qwen3's Program is not taken for the rotary block")
	}
	if gp, _ := presetProgram(t, "tiny"); isRotary(gp) {
		t.Fatal("GPT-2's Program is taken for the rotary block")
	}
	got, err := lowerRotary(p, c)
	if err != nil {
		t.Fatal(err)
	}
	want := loweredRotary{tokenEmbedding: "embed", normF: "normw", ln1: "ln1w", qkv: "qkvw", qNorm: "qnormw", kNorm: "knormw",
		o: "attprojw", ln2: "ln2w", gateUp: "gateupw", down: "downw", eps: 1e-6, theta: 1e6}
	if got != want {
		t.Errorf("lowered %+v, want %+v", got, want)
	}
	for _, tc := range []struct {
		name string
		edit func(p *arch.Program)
		want string
	}{
		{"head size 64", func(p *arch.Program) { p.Layer = slices.Clone(p.Layer); p.Layer[2].HeadDim = 64 }, "head size 128"},
		{"9 query heads a KV head", func(p *arch.Program) {
			p.Layer = slices.Clone(p.Layer)
			p.Layer[2].NumHeads, p.Layer[2].NumKVHeads = 18, 2
		}, "up to 8 query heads a KV head"},
		{"untied LM head", func(p *arch.Program) { p.Head = slices.Clone(p.Head); p.Head[1].Weight = "lm_head.weight" }, "tied embeddings only"},
		{"no q/k norms", func(p *arch.Program) { p.Layer = slices.Clone(p.Layer); p.Layer[2].QNorm = "" }, "q/k norms"},
		{"a projection bias", func(p *arch.Program) { p.Layer = slices.Clone(p.Layer); p.Layer[1].Bias = "qkvb" }, "layer op 1"},
		{"LayerNorm for RMSNorm", func(p *arch.Program) { p.Layer = slices.Clone(p.Layer); p.Layer[0].Kind = arch.OpLayerNorm }, "layer op 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, c := presetProgram(t, "qwen3-0.6b")
			tc.edit(&p)
			if _, err := lowerRotary(p, c); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// The tiny preset's head size (32) is the CPU path's, not the kernels'.
	p, c = presetProgram(t, "qwen3-tiny")
	if _, err := lowerRotary(p, c); err == nil || !strings.Contains(err.Error(), "head size 128") {
		t.Fatalf("qwen3-tiny: got %v, want the head size named", err)
	}
}
