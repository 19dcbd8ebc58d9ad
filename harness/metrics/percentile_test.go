package metrics

import (
	"encoding/json"
	"math"
	"os"
	"slices"
	"testing"
)

// numpyFixture is testdata/percentiles.json, written by NumPy itself
// (testdata/make_percentiles.py).
type numpyFixture struct {
	NumPy       string    `json:"numpy"`
	Percentiles []float64 `json:"percentiles_p"`
	Sets        []struct {
		Name   string    `json:"name"`
		Values []float64 `json:"values"`
		Gen    *struct {
			Kind string `json:"kind"`
			Seed uint64 `json:"seed"`
			N    int    `json:"n"`
		} `json:"gen"`
		Percentiles []float64 `json:"percentiles"` // null for the empty set
		Mean        *float64  `json:"mean"`
		Max         *float64  `json:"max"`
	} `json:"sets"`
	T975 []struct {
		DF int     `json:"df"`
		T  float64 `json:"t"`
	} `json:"t975"`
}

func loadNumpy(t *testing.T) numpyFixture {
	t.Helper()
	data, err := os.ReadFile("testdata/percentiles.json")
	if err != nil {
		t.Fatal(err)
	}
	var f numpyFixture
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// generated mirrors make_percentiles.py's generators: SplitMix64 units and
// the same IEEE operations in the same order.
func generated(kind string, seed uint64, n int) []float64 {
	out := make([]float64, n)
	x := seed
	for i := range out {
		x += 0x9E3779B97F4A7C15
		z := x
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
		z = (z ^ (z >> 27)) * 0x94D049BB133111EB
		z ^= z >> 31
		u := float64(z>>11) * 0x1p-53
		switch kind {
		case "cubed":
			out[i] = u * u * u * 1000.0
		case "ties50":
			out[i] = math.Floor(u * 50.0)
		case "signed":
			out[i] = (u - 0.5) * 1e6
		default:
			panic("unknown generator " + kind)
		}
	}
	return out
}

// Percentile equals np.percentile bit for bit: n = 0, 1, 2, ties, all
// equal, negatives, neighbouring floats, and sets of ~100 000 samples.
func TestPercentileEqualsNumPy(t *testing.T) {
	f := loadNumpy(t)
	for _, set := range f.Sets {
		values := set.Values
		if set.Gen != nil {
			values = generated(set.Gen.Kind, set.Gen.Seed, set.Gen.N)
		}
		t.Run(set.Name, func(t *testing.T) {
			before := slices.Clone(values)
			for i, p := range f.Percentiles {
				got, ok := Percentile(values, p)
				if set.Percentiles == nil {
					if ok {
						t.Errorf("p%v of an empty set = %v, want undefined", p, got)
					}
					continue
				}
				if want := set.Percentiles[i]; !ok || got != want {
					t.Errorf("p%v = %v (ok %v), NumPy %s says %v", p, got, ok, f.NumPy, want)
				}
			}
			if !slices.Equal(values, before) {
				t.Error("Percentile reordered its input")
			}
			s := Summarize(values)
			if set.Percentiles == nil {
				if s.N != 0 || s.Mean != nil || s.P50 != nil || s.P90 != nil || s.P99 != nil || s.Max != nil {
					t.Errorf("empty set summary = %+v, want all null", s)
				}
				return
			}
			at := func(p float64) float64 { return set.Percentiles[slices.Index(f.Percentiles, p)] }
			if s.N != len(values) || *s.P50 != at(50) || *s.P90 != at(90) || *s.P99 != at(99) || *s.Max != *set.Max {
				t.Errorf("summary n/p50/p90/p99/max = %d/%v/%v/%v/%v, NumPy %d/%v/%v/%v/%v",
					s.N, *s.P50, *s.P90, *s.P99, *s.Max, len(values), at(50), at(90), at(99), *set.Max)
			}
			// Both sum pairwise in 8192-element buffers; NumPy's SIMD
			// order can still differ in the last bit (one ulp on the
			// 100 001-sample set), so allow a few ulps.
			if math.Abs(*s.Mean-*set.Mean) > 1e-15*math.Abs(*set.Mean) {
				t.Errorf("mean = %v, NumPy %v", *s.Mean, *set.Mean)
			}
		})
	}
}

func TestPercentileRejects(t *testing.T) {
	for _, p := range []float64{-1, 100.5, math.NaN()} {
		if _, ok := Percentile([]float64{1, 2}, p); ok {
			t.Errorf("p = %v accepted", p)
		}
	}
	s := Summarize([]float64{math.NaN(), 2, math.NaN()})
	if s.N != 1 || *s.Mean != 2 || *s.P99 != 2 {
		t.Errorf("NaN samples not dropped: %+v", s)
	}
}

func TestTCritical95(t *testing.T) {
	for _, c := range loadNumpy(t).T975 {
		if got := TCritical95(c.DF); math.Abs(got-c.T) > 1e-9*c.T {
			t.Errorf("t(0.975, %d) = %.15g, NumPy quadrature %.15g", c.DF, got, c.T)
		}
	}
	if !math.IsNaN(TCritical95(0)) {
		t.Error("df 0: want NaN")
	}
}
