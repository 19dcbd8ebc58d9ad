package main

import (
	"testing"

	"github.com/roseinfer/roseinfer/engine/sample"
)

func TestParseSampling(t *testing.T) {
	for s, want := range map[string]sample.Params{
		"greedy":        {},
		"T0.7/p0.9/k50": {Temperature: 0.7, TopP: 0.9, TopK: 50},
		"T0.6/p1/k0":    {Temperature: 0.6, TopP: 1, TopK: 0},
	} {
		got, err := parseSampling(s)
		if err != nil || got != want {
			t.Errorf("parseSampling(%q) = %+v, %v; want %+v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "T0.7", "T0.7/p0.9", "p0.9/T0.7/k50", "T0/p1/k0", "T-1/p1/k0", "TNaN/p1/k0",
		"T0.7/p0/k5", "T0.7/p1.5/k5", "T0.7/p0.9/k-1", "T0.7/p0.9/k1.5", "T0.7/p0.9/k99999999999999999999"} {
		if _, err := parseSampling(s); err == nil {
			t.Errorf("parseSampling(%q): no error", s)
		}
	}
}
