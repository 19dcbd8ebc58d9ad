package results

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestCapacityRoundTrip(t *testing.T) {
	lo, hi, scale := 60.0, 62.5, 0.5
	in := &Capacity{SLO: map[string]float64{"ttft": 20}, GoodputTarget: 0.95, Tolerance: 0.05, Meta: map[string]any{"mode": "scale"},
		Backends: []CapacityBackend{{Backend: "roseinfer", Mode: "scale", BaseRateReqS: 30,
			Probes:  []CapacityProbe{{RateReqS: 60, Scale: 0.5, Phase: "bisect", SLOAttainment: 1, Pass: true, Valid: true, NumRequests: 10, NumSuccess: 10}},
			Bracket: CapacityBracket{LoReqS: &lo, HiReqS: &hi}, CapacityReqS: &lo, CapacityScale: &scale,
			Converged: true, Stop: "converged"}}}
	path := filepath.Join(t.TempDir(), CapacityFile)
	if err := WriteJSON(path, in); err != nil {
		t.Fatal(err)
	}
	got, err := LoadCapacity(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Backends, in.Backends) || got.Meta["mode"] != "scale" || got.GoodputTarget != 0.95 || got.SLO["ttft"] != 20 {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, in)
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), `"ttft_p90_ms": null`) {
		t.Errorf("a missing figure is not null:\n%s", data)
	}
	bad := filepath.Join(t.TempDir(), "x.json")
	os.WriteFile(bad, []byte(`{"summaries": []}`), 0o644)
	if _, err := LoadCapacity(bad); err == nil || !strings.Contains(err.Error(), "not a capacity.json") {
		t.Errorf("online results read as capacity: %v", err)
	}
}
