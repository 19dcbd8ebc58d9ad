package workload

import (
	"math"
	"strings"
	"testing"
)

// The trace's own arrivals give its mean rate; poisson arrivals give
// exactly 1 req/s, so a schedule at scale 1/λ offers λ req/s; the same rows
// and prompts either way. An unknown value is refused by name.
func TestArrivals(t *testing.T) {
	base := Options{N: 50, MaxOutputLen: 16, PromptOverheadTokens: 8, PrefixMode: "base", Seed: 42,
		WarmupInputLen: 16, WarmupOutputLen: 4}
	tr, err := Load(&base)
	if err != nil {
		t.Fatal(err)
	}
	// The bundled Azure trace's first 50 rows span a few tens of seconds.
	if r := tr.MeanRate(); !(r > 0.1 && r < 100) {
		t.Errorf("trace mean rate %v req/s: not the trace's", r)
	}
	po := base
	po.Arrivals = "poisson"
	p, err := Load(&po)
	if err != nil {
		t.Fatal(err)
	}
	if r := p.MeanRate(); math.Abs(r-1) > 1e-9 {
		t.Errorf("poisson mean rate %v, want 1", r)
	}
	if p.NumRows() != tr.NumRows() || len(p.Prompts()[7]) != len(tr.Prompts()[7]) {
		t.Error("poisson arrivals changed the rows or prompts")
	}
	items, err := p.Items(make([][]byte, p.NumRows()), 0.5, 0)
	if err != nil {
		t.Fatal(err)
	}
	if last := items[len(items)-1].AtS; math.Abs(last-float64(p.NumRows()-1)*0.5) > 1e-9 {
		t.Errorf("last arrival at scale 0.5: %v s, want (n-1)/2", last)
	}
	bad := base
	bad.Arrivals = "uniform"
	if _, err := Load(&bad); err == nil || !strings.Contains(err.Error(), "uniform") {
		t.Errorf("arrivals uniform: err %v", err)
	}
}
