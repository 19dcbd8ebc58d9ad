package model

import (
	"math"
	"testing"

	"github.com/roseinfer/roseinfer/engine/model/gpt2"
)

func TestInitRandomIsPure(t *testing.T) {
	a, err := InitRandom(smallConfig, 42)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := InitRandom(smallConfig, 42)
	c, _ := InitRandom(smallConfig, 43)
	same, diff := true, 0
	for i := range a.Data {
		same = same && a.Data[i] == b.Data[i]
		if a.Data[i] != c.Data[i] {
			diff++
		}
	}
	if !same {
		t.Error("two draws with one seed differ")
	}
	if diff < len(a.Data)*99/100 {
		t.Errorf("seeds 42 and 43 share %d of %d values", len(a.Data)-diff, len(a.Data))
	}
}

// TestInitRandomDistribution checks each tensor kind's mean and standard
// deviation on the tiny preset (enough values for tight bounds).
func TestInitRandomDistribution(t *testing.T) {
	cfg, _ := Preset("tiny")
	w, err := InitRandom(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	proj := 0.02 / math.Sqrt(2*float64(cfg.NumLayers))
	tensor := func(name string) []float32 {
		x, err := w.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		return x.Data
	}
	tests := []struct {
		name      string
		data      []float32
		mean, std float64
	}{
		{"wte", tensor(gpt2.WTE), 0, 0.02},
		{"wpe", tensor(gpt2.WPE), 0, 0.02},
		{"c_attn", tensor(gpt2.QKVW), 0, 0.02},
		{"c_fc", tensor(gpt2.FCW), 0, 0.02},
		{"attn.c_proj", tensor(gpt2.AttProjW), 0, proj},
		{"mlp.c_proj", tensor(gpt2.FCProjW), 0, proj},
		{"ln_1 weight", tensor(gpt2.LN1W), 1, 0.1},
		{"ln_f bias", tensor(gpt2.LNFB), 0, 0.05},
		{"c_fc bias", tensor(gpt2.FCB), 0, 0.05},
	}
	for _, tt := range tests {
		var s, s2 float64
		for _, v := range tt.data {
			s += float64(v)
			s2 += float64(v) * float64(v)
		}
		n := float64(len(tt.data))
		mean := s / n
		std := math.Sqrt(s2/n - mean*mean)
		// Five standard errors of the mean and of the standard deviation.
		if math.Abs(mean-tt.mean) > 5*tt.std/math.Sqrt(n) || math.Abs(std-tt.std) > 5*tt.std/math.Sqrt(2*n) {
			t.Errorf("%s: mean %.5f std %.5f over %d values, want %.5f and %.5f", tt.name, mean, std, len(tt.data), tt.mean, tt.std)
		}
	}
}
