package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/results"
)

// sampleCapacity: roseinfer converged on 61.69 req/s after one invalid
// probe; vllm ran out of probes with the client as its upper bound.
func sampleCapacity() *results.Capacity {
	probe := func(phase string, rate, att float64, pass, valid bool) results.CapacityProbe {
		p := results.CapacityProbe{Phase: phase, RateReqS: rate, Scale: 40 / rate, SLOAttainment: att, Pass: pass, Valid: valid,
			NumRequests: 100, NumSuccess: 100, ReqPerS: rate * 0.9, TTFTP90Ms: fp(12.5), TPOTP90Ms: fp(2), SendLagP99Ms: fp(0.25)}
		if !valid {
			p.InvalidReason, p.SendLagP99Ms = "send lag p99 9.000 ms > 5 ms: the client fell behind the schedule", fp(9)
		}
		return p
	}
	return &results.Capacity{SLO: map[string]float64{"ttft": 20, "tpot": 5}, GoodputTarget: 0.95, Tolerance: 0.05,
		Meta: map[string]any{"mode": "scale", "n": 100.0, "device": "sim"},
		Backends: []results.CapacityBackend{
			{Backend: "roseinfer", Mode: "scale", BaseRateReqS: 40, Probes: []results.CapacityProbe{
				probe("bracket", 40, 1, true, true), probe("bracket", 80, 1, false, false), probe("bisect", 56.57, 1, true, true),
				probe("bisect", 67.27, 0.2, false, true), probe("bisect", 61.69, 0.99, true, true), probe("bisect", 64.42, 0.6, false, true),
				probe("confirm", 61.69, 0.97, true, true)},
				Bracket:      results.CapacityBracket{LoReqS: fp(61.69), HiReqS: fp(64.42)},
				CapacityReqS: fp(61.69), CapacityScale: fp(40 / 61.69), Converged: true, Stop: "converged"},
			{Backend: "vllm", Mode: "scale", BaseRateReqS: 40, Probes: []results.CapacityProbe{
				probe("bracket", 40, 1, true, true), probe("bracket", 80, 1, false, false)},
				Bracket:      results.CapacityBracket{LoReqS: fp(40), HiReqS: fp(80)},
				CapacityReqS: fp(40), CapacityScale: fp(1), Stop: "max_probes", LimitedByClient: true},
		}}
}

func TestWriteCapacitySummaryGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteCapacitySummary(&buf, sampleCapacity()); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "capacity_summary.golden.md", buf.Bytes())
	out := buf.String()
	for _, want := range []string{"tpot≤5ms, ttft≤20ms", "at least 95% of requests", "within 5%",
		"61.69 – 64.42", "FAIL (invalid: send lag p99 9.000 ms", "out of probes",
		"the upper bound is the client falling behind"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

// bench report on a capacity run directory adds the capacity section, its
// figure and summary, and warns about the search that did not converge.
func TestReportWriteCapacityRun(t *testing.T) {
	dir := t.TempDir()
	on, err := os.ReadFile(filepath.Join("..", "..", "results", "testdata", "report_ours_online.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, results.OnlineResultsFile), on, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := results.WriteJSON(filepath.Join(dir, results.CapacityFile), sampleCapacity()); err != nil {
		t.Fatal(err)
	}
	written, err := Write(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{CapacitySummaryFile, "figures/capacity_goodput.png", "figures/capacity_goodput.svg", ReportFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s not written (%v); wrote %v", name, err, written)
		}
	}
	page, err := os.ReadFile(filepath.Join(dir, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	for _, want := range []string{`<section id="capacity">`, `href="#capacity"`, `id="fig-capacity_goodput"`,
		"<strong>Capacity of vLLM</strong>", `<section id="online">`} {
		if !strings.Contains(html, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if strings.Index(html, `<section id="capacity">`) > strings.Index(html, `<section id="online">`) {
		t.Error("the capacity section should come before the online tables it summarises")
	}
}
