package cpu

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/roseinfer/roseinfer/engine/model"
	"github.com/roseinfer/roseinfer/engine/model/qwen3"
)

// qwen3Reference is Qwen3ForCausalLM's forward written out densely in
// float64 from transformers' modeling_qwen3.py (no cache, no ops, no
// batching): the logits at every position of ids. It is slow and only for
// the tiny preset.
func qwen3Reference(t *testing.T, w *model.Weights, ids []int32) [][]float64 {
	t.Helper()
	c := w.Config
	C, I, V, NH, NKV, HS, L := c.Channels, c.Intermediate, c.VocabSize, c.NumHeads, c.NumKVHeads, c.HeadDim, c.NumLayers
	eps := float64(c.LayerNormEpsilon)
	get := func(name string, l int) []float32 {
		tn, err := w.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		if l < 0 {
			return tn.Data
		}
		return tn.Layer(l, L)
	}
	rms := func(x []float64, wt []float32) []float64 {
		ms := 0.0
		for _, v := range x {
			ms += v * v / float64(len(x))
		}
		out := make([]float64, len(x))
		for i, v := range x {
			out[i] = v / math.Sqrt(ms+eps) * float64(wt[i])
		}
		return out
	}
	linear := func(x []float64, wt []float32, outDim int) []float64 { // nn.Linear, (out, in)
		out := make([]float64, outDim)
		for o := range out {
			for i, v := range x {
				out[o] += v * float64(wt[o*len(x)+i])
			}
		}
		return out
	}
	rotate := func(x []float64, pos int) { // rotate_half style
		half := HS / 2
		for j := range half {
			a := float64(pos) * math.Pow(c.RopeTheta, -2*float64(j)/float64(HS))
			x1, x2 := x[j], x[j+half]
			x[j], x[j+half] = x1*math.Cos(a)-x2*math.Sin(a), x2*math.Cos(a)+x1*math.Sin(a)
		}
	}
	T := len(ids)
	h := make([][]float64, T)
	emb := get(qwen3.Embed, -1)
	for p, id := range ids {
		h[p] = make([]float64, C)
		for i := range C {
			h[p][i] = float64(emb[int(id)*C+i])
		}
	}
	for l := range L {
		qkvw := get(qwen3.QKVW, l)
		qw, kw, vw := qkvw[:NH*HS*C], qkvw[NH*HS*C:(NH+NKV)*HS*C], qkvw[(NH+NKV)*HS*C:]
		q, k, v := make([][]float64, T), make([][]float64, T), make([][]float64, T)
		for p := range T {
			x := rms(h[p], get(qwen3.LN1W, l))
			q[p], k[p], v[p] = linear(x, qw, NH*HS), linear(x, kw, NKV*HS), linear(x, vw, NKV*HS)
			for hd := range NH {
				copy(q[p][hd*HS:], rms(q[p][hd*HS:(hd+1)*HS], get(qwen3.QNormW, l)))
				rotate(q[p][hd*HS:(hd+1)*HS], p)
			}
			for hd := range NKV {
				copy(k[p][hd*HS:], rms(k[p][hd*HS:(hd+1)*HS], get(qwen3.KNormW, l)))
				rotate(k[p][hd*HS:(hd+1)*HS], p)
			}
		}
		for p := range T {
			att := make([]float64, NH*HS)
			for hd := range NH {
				kh := hd / (NH / NKV)
				scores := make([]float64, p+1)
				maxv, sum := math.Inf(-1), 0.0
				for s := range p + 1 {
					for d := range HS {
						scores[s] += q[p][hd*HS+d] * k[s][kh*HS+d]
					}
					scores[s] /= math.Sqrt(float64(HS))
					maxv = math.Max(maxv, scores[s])
				}
				for s := range scores {
					scores[s] = math.Exp(scores[s] - maxv)
					sum += scores[s]
				}
				for s := range scores {
					for d := range HS {
						att[hd*HS+d] += scores[s] / sum * v[s][kh*HS+d]
					}
				}
			}
			o := linear(att, get(qwen3.AttProjW, l), C)
			for i := range C {
				h[p][i] += o[i]
			}
			x := rms(h[p], get(qwen3.LN2W, l))
			gu := linear(x, get(qwen3.GateUpW, l), 2*I)
			act := make([]float64, I)
			for i := range I {
				g := gu[i]
				act[i] = g / (1 + math.Exp(-g)) * gu[I+i]
			}
			d := linear(act, get(qwen3.DownW, l), C)
			for i := range C {
				h[p][i] += d[i]
			}
		}
	}
	logits := make([][]float64, T)
	for p := range T {
		logits[p] = linear(rms(h[p], get(qwen3.NormW, -1)), emb, V)
	}
	return logits
}

// TestQwen3MatchesDenseReference: the device's Qwen3 forward (paged cache,
// a prompt in two chunks, then decode steps) against qwen3Reference at
// every fed position, on qwen3-tiny with norm weights perturbed away from
// 1 so that a dropped norm weight shows. This stands until the HF golden
// fixture (TestQwen3GoldenLogits) is committed, and beside it after.
func TestQwen3MatchesDenseReference(t *testing.T) {
	cfg, err := model.Preset("qwen3-tiny")
	if err != nil {
		t.Fatal(err)
	}
	w, err := model.InitRandom(cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{qwen3.LN1W, qwen3.LN2W, qwen3.QNormW, qwen3.KNormW, qwen3.NormW} {
		tn, _ := w.Tensor(name)
		for i := range tn.Data {
			tn.Data[i] = 1 + 0.3*float32(math.Sin(float64(i)*1.7+float64(len(name))))
		}
	}
	d := newTestDevice(t, w, 1, Options{})
	prompt := []int32{151644, 872, 198, 9707, 11, 1246, 525, 498, 30, 151645, 198, 151935, 0}
	rows, tokens := runSingle(t, d, blockTable(cfg, 0, 1), prompt, []int{4, len(prompt) - 1}, 3)
	seq := append(append([]int32(nil), prompt...), tokens...)
	ref := qwen3Reference(t, w, seq)
	// rows: at position 4, at the prompt's end, then after each decoded token.
	positions := []int{4, len(prompt) - 1, len(prompt), len(prompt) + 1, len(prompt) + 2}
	for r, pos := range positions {
		want := make([]float32, len(ref[pos]))
		for i, v := range ref[pos] {
			want[i] = float32(v)
		}
		rel := relError(rows[r], want)
		t.Logf("position %2d: max relative error %.2e", pos, rel)
		if rel > goldenTolerance {
			t.Errorf("position %d: relative error %.2e against the dense reference > %.0e", pos, rel, goldenTolerance)
		}
	}
}

// TestQwen3CheckpointRoundTrip: a qwen3-tiny checkpoint written in bf16 loads
// back as the same config, with weights equal to the bf16 rounding of the
// originals, q|k|v and gate|up reassembled in order.
func TestQwen3CheckpointRoundTrip(t *testing.T) {
	cfg, err := model.Preset("qwen3-tiny")
	if err != nil {
		t.Fatal(err)
	}
	w, err := model.InitRandom(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, dt := range []model.DType{model.FP32, model.BF16} {
		dir := filepath.Join(t.TempDir(), dt.String())
		if err := model.WriteCheckpoint(dir, cfg, w, dt); err != nil {
			t.Fatal(err)
		}
		got, err := model.LoadCheckpoint(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got.Config != w.Config {
			t.Fatalf("%s: config %+v, wrote %+v", dt, got.Config, w.Config)
		}
		for i, v := range w.Data {
			want := v
			if dt == model.BF16 {
				want = math.Float32frombits((math.Float32bits(v) + 0x7FFF + (math.Float32bits(v)>>16)&1) &^ 0xFFFF)
			}
			if got.Data[i] != want {
				t.Fatalf("%s: value %d is %g, wrote %g (want %g)", dt, i, got.Data[i], v, want)
			}
		}
	}
}
