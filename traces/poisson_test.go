package traces

import (
	"math"
	"testing"
)

func TestMeanRate(t *testing.T) {
	cases := []struct {
		name string
		ts   []float64
		want float64
	}{
		{"none", nil, 0},
		{"one row", []float64{5}, 0},
		{"same instant", []float64{2, 2, 2}, 0},
		{"four rows over 1.5 s", []float64{10, 10.5, 11, 11.5}, 2},
		{"unsorted", []float64{4, 0, 2}, 0.5},
	}
	for _, c := range cases {
		rows := make([]Row, len(c.ts))
		for i, ts := range c.ts {
			rows[i].TimestampS = ts
		}
		if got := MeanRate(rows); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s: MeanRate = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestPoissonArrivals(t *testing.T) {
	const n = 20000
	rows := make([]Row, n)
	for i := range rows {
		rows[i] = Row{Index: i, TimestampS: 7, InputLen: i + 1, OutputLen: 2}
	}
	got := PoissonArrivals(rows, 42)
	if rows[1].TimestampS != 7 {
		t.Fatal("PoissonArrivals modified its input")
	}
	if r := MeanRate(got); math.Abs(r-1) > 1e-9 {
		t.Errorf("MeanRate = %v, want exactly 1", r)
	}
	// Exponential gaps of mean 1: the variance is 1 (a periodic schedule
	// would give 0) and P(gap > 1) = 1/e. With 20,000 gaps both are within
	// 3% of the expected value with overwhelming probability, and the seed
	// is fixed, so this is no flaky statistical test.
	var sum, sumSq float64
	over := 0
	for i := 1; i < n; i++ {
		g := got[i].TimestampS - got[i-1].TimestampS
		if g < 0 {
			t.Fatalf("row %d arrives before row %d", i, i-1)
		}
		sum += g
		sumSq += g * g
		if g > 1 {
			over++
		}
	}
	mean := sum / (n - 1)
	if v := sumSq/(n-1) - mean*mean; math.Abs(v-1) > 0.05 {
		t.Errorf("gap variance %v, want about 1 (exponential gaps)", v)
	}
	if p := float64(over) / (n - 1); math.Abs(p-1/math.E) > 0.02 {
		t.Errorf("P(gap > mean) = %v, want about 1/e", p)
	}
	for i := range got {
		if got[i].Index != i || got[i].InputLen != i+1 {
			t.Fatalf("row %d: order or lengths changed: %+v", i, got[i])
		}
	}
	again := PoissonArrivals(rows, 42)
	other := PoissonArrivals(rows, 43)
	if again[n-2].TimestampS != got[n-2].TimestampS {
		t.Error("the same seed gave different arrivals")
	}
	if other[n-2].TimestampS == got[n-2].TimestampS {
		t.Error("another seed gave the same arrivals")
	}
	if one := PoissonArrivals(rows[:1], 1); len(one) != 1 || one[0].TimestampS != 0 {
		t.Errorf("one row: %+v", one)
	}
}
