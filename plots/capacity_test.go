package plots

import (
	"bytes"
	"errors"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/roseinfer/roseinfer/results"
)

// capacityFixture is a converged search: bracket up from 40 req/s, bisect,
// confirm 61.69; one probe at 160 req/s whose client fell behind; and a
// second backend whose every probe failed.
func capacityFixture() *results.Capacity {
	answer := 61.69
	probe := func(rate, att float64, pass, valid bool) results.CapacityProbe {
		return results.CapacityProbe{RateReqS: rate, Scale: 40 / rate, SLOAttainment: att, Pass: pass, Valid: valid}
	}
	return &results.Capacity{GoodputTarget: 0.95, Tolerance: 0.05, Backends: []results.CapacityBackend{
		{Backend: "roseinfer", Probes: []results.CapacityProbe{
			probe(40, 1, true, true), probe(80, 0.04, false, true), probe(160, 0.01, false, false),
			probe(56.57, 1, true, true), probe(67.27, 0.2, false, true), probe(61.69, 0.99, true, true),
			probe(64.42, 0.6, false, true), probe(61.69, 0.98, true, true),
		}, CapacityReqS: &answer},
		{Backend: "vllm", Probes: []results.CapacityProbe{probe(40, 0.5, false, true), probe(20, 0.7, false, true)}},
	}}
}

func TestCapacityGoodput(t *testing.T) {
	fig, err := CapacityGoodput(capacityFixture())
	if err != nil {
		t.Fatal(err)
	}
	pngBytes, err := fig.PNG()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(bytes.NewReader(pngBytes)); err != nil {
		t.Fatalf("PNG does not decode: %v", err)
	}
	svg, err := fig.SVG()
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"capacity 61.69 req/s", "roseinfer: 61.69 req/s", "vLLM: no rate passed",
		"target 95% good", "invalid (send lag)", "offered load (req/s, log scale)", "20", "50", "100"} {
		if !bytes.Contains(svg, []byte(">"+text+"<")) {
			t.Errorf("SVG has no text %q", text)
		}
	}
	again, _ := fig.SVG()
	if !bytes.Equal(svg, again) {
		t.Error("rendering twice gave different bytes")
	}
	if dir := os.Getenv("PLOTS_OUT"); dir != "" { // look at it: PLOTS_OUT=/tmp/x go test ./plots -run Capacity
		os.WriteFile(filepath.Join(dir, fig.Name+".png"), pngBytes, 0o644)
	}
	if _, err := CapacityGoodput(&results.Capacity{Backends: []results.CapacityBackend{{Backend: "roseinfer"}}}); !errors.Is(err, ErrNoCapacityData) {
		t.Errorf("no probes: err %v, want ErrNoCapacityData", err)
	}
}
