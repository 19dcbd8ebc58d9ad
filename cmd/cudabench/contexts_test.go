package main

import (
	"math"
	"strings"
	"testing"
)

func TestCheckContexts(t *testing.T) {
	for _, c := range []struct {
		ctx   int
		ratio float64
		err   string // "" for none
	}{
		{300, 0, ""},
		{300, 0.5, ""},
		{2, 0.5, ""},
		{1, 0.99, ""},
		{0, 0, "-ctx 0"},
		{maxDecodeContext + 1, 0, "-ctx 1048577"},
		{300, 1, "-ctx-range-ratio 1"},
		{300, -0.1, "-ctx-range-ratio -0.1"},
		{300, math.NaN(), "-ctx-range-ratio NaN"},
	} {
		err := checkContexts(c.ctx, c.ratio)
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("checkContexts(%d, %v) = %v, want an error containing %q", c.ctx, c.ratio, err, c.err)
		}
	}
}

func TestCtxBounds(t *testing.T) {
	for _, c := range []struct {
		ctx    int
		ratio  float64
		lo, hi int
	}{
		{300, 0, 300, 300},
		{300, 0.5, 150, 450},
		{1000, 0.9, 100, 1900},
		{7, 0.5, 4, 10},
	} {
		if lo, hi := ctxBounds(c.ctx, c.ratio); lo != c.lo || hi != c.hi {
			t.Errorf("ctxBounds(%d, %v) = %d, %d, want %d, %d", c.ctx, c.ratio, lo, hi, c.lo, c.hi)
		}
	}
	if got := ctxLabel(300, 0); got != "300" {
		t.Errorf("ctxLabel(300, 0) = %q", got)
	}
	if got := ctxLabel(300, 0.5); got != "300±50%" {
		t.Errorf("ctxLabel(300, 0.5) = %q", got)
	}
}
