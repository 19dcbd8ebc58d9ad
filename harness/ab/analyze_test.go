package ab

import (
	"math"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/harness/metrics"
	"github.com/roseinfer/roseinfer/harness/report"
	"github.com/roseinfer/roseinfer/results"
)

// record is a request of trace row index sent at startS whose tokens
// arrive every gapS from ttftS on (seconds); failed records carry an error.
func record(index int, startS, ttftS, gapS float64, tokens int, failed bool) results.Request {
	r := results.Request{Index: index, StartS: startS, ScheduledS: startS}
	for k := range tokens {
		r.ChunkS = append(r.ChunkS, ttftS+float64(k)*gapS)
		r.ChunkTokens = append(r.ChunkTokens, 1)
	}
	r.EndS = startS + r.ChunkS[len(r.ChunkS)-1]
	if failed {
		msg := "stream broke"
		r.Error, r.ErrorKind = &msg, "stream_broken"
	}
	metrics.FillRequest(&r)
	return r
}

// abRun is an A/B's records: pairs rounds per side of 10 requests, B's
// token gaps slower by factor, a little noise that differs by round and
// request; failB (failA) requests of each of B's (A's) rounds fail.
func abRun(pairs int, factor float64, failA, failB int) *results.Online {
	on := &results.Online{Meta: map[string]any{}, ByBackend: map[string]*results.Backend{}}
	for s, label := range []string{LabelA, LabelB} {
		b := &results.Backend{Backend: label}
		for round := 1; round <= pairs; round++ {
			var reqs []results.Request
			for i := range 10 {
				noise := 1 + 0.01*math.Sin(float64(7*round+13*i+5*s))
				gap := 0.001 * noise * map[bool]float64{true: factor, false: 1}[s == 1]
				fail := i < map[bool]int{true: failB, false: failA}[s == 1]
				reqs = append(reqs, record(i, 0.05*float64(i), 0.003*noise, gap, 20+i, fail))
			}
			sum := metrics.SummarizeScale(reqs, metrics.ScaleOptions{Backend: label, Scale: 1, Round: round})
			b.Runs = append(b.Runs, results.Run{Scale: 1, Round: round, Summary: sum, RequestMetrics: reqs})
		}
		on.ByBackend[label] = b
	}
	return on
}

func stats(rules string) Stats {
	st := DefaultOptions().Stats
	st.Iterations = 500
	switch rules {
	case "":
	case "none":
		st.Rules = nil
	default:
		var err error
		if st.Rules, err = report.ParseFailOn(rules); err != nil {
			panic(err)
		}
	}
	return st
}

func TestAnalyzeVerdicts(t *testing.T) {
	cases := []struct {
		name                     string
		on                       *results.Online
		rules                    string
		regressions              int
		unevaluated, warning     string
		wantStatus, wantMetric   string
		wantRatioLo, wantRatioHi float64
	}{
		{name: "identical", on: abRun(12, 1, 0, 0), wantMetric: "tpot_ms.p90", wantStatus: report.StatusOK, wantRatioLo: 0.99, wantRatioHi: 1.01},
		{name: "20% slower decode", on: abRun(4, 1.2, 0, 0), regressions: 4, // tpot p90, p99, itl p99, e2e p99; not tok/s: open loop, the span grows by the last request's 1.2x only
			wantMetric: "tpot_ms.p90", wantStatus: report.StatusRegression, wantRatioLo: 1.19, wantRatioHi: 1.21},
		{name: "5% slower under a 10% rule", on: abRun(4, 1.05, 0, 0), wantMetric: "tpot_ms.p90", wantStatus: report.StatusOK,
			wantRatioLo: 1.04, wantRatioHi: 1.06},
		{name: "5% slower under a 1% rule", on: abRun(4, 1.05, 0, 0), rules: "tpot_ms.p90>+1%", regressions: 1,
			wantMetric: "tpot_ms.p90", wantStatus: report.StatusRegression, wantRatioLo: 1.04, wantRatioHi: 1.06},
		{name: "B lost requests", on: abRun(4, 1, 0, 1), rules: "none", regressions: 1,
			wantMetric: "success_rate", wantStatus: report.StatusRegression, wantRatioLo: 0.89, wantRatioHi: 0.91},
		{name: "A lost requests", on: abRun(4, 1, 1, 0), rules: "none", unevaluated: "A's success rate 0.9000 is below 0.99",
			wantMetric: "tpot_ms.p90", wantStatus: report.StatusInfo, wantRatioLo: 0.95, wantRatioHi: 1.05},
		{name: "a rule on a metric ab does not measure", on: abRun(4, 1, 0, 0), rules: "icl_ms.p90>+5%",
			unevaluated: "icl_ms.p90>+5%: bench ab does not measure icl_ms.p90"},
		{name: "few blocks", on: abRun(4, 1, 0, 0), warning: "4 round pairs make 2 ABBA blocks",
			wantMetric: "tpot_ms.p90", wantStatus: report.StatusOK, wantRatioLo: 0.99, wantRatioHi: 1.01},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := stats(c.rules)
			res, err := Analyze(c.on, st)
			if err != nil {
				t.Fatal(err)
			}
			if res.Regressions != c.regressions {
				t.Errorf("%d regressions, want %d", res.Regressions, c.regressions)
			}
			if got := strings.Join(res.Unevaluated, "\n"); (c.unevaluated == "") != (got == "") || !strings.Contains(got, c.unevaluated) {
				t.Errorf("unevaluated %q, want %q", got, c.unevaluated)
			}
			if got := strings.Join(res.Warnings, "\n"); !strings.Contains(got, c.warning) {
				t.Errorf("warnings %q, want %q", got, c.warning)
			}
			if c.wantMetric == "" {
				return
			}
			for _, r := range res.Rows {
				if r.Metric != c.wantMetric {
					continue
				}
				if r.Status != c.wantStatus || r.Ratio == nil || *r.Ratio < c.wantRatioLo || *r.Ratio > c.wantRatioHi {
					t.Errorf("%s: status %s ratio %v, want %s in [%v, %v]", r.Metric, r.Status, value(r.Ratio), c.wantStatus,
						c.wantRatioLo, c.wantRatioHi)
				}
				return
			}
			t.Errorf("no row for %s", c.wantMetric)
		})
	}
}

func TestJudge(t *testing.T) {
	above, _ := report.ParseFailOn("tpot_ms.p90>+10%")
	below, _ := report.ParseFailOn("output_tok_s<-5%")
	row := func(ratio, lo, hi float64) Row {
		r := Row{Ratio: &ratio}
		if !math.IsNaN(lo) {
			r.CI = &[2]float64{lo, hi}
		}
		return r
	}
	cases := []struct {
		name string
		row  Row
		rule report.CompareRule
		want string
	}{
		{"within the rule", row(1.05, 1.01, 1.09), above[0], report.StatusOK},
		{"beyond, interval excludes 1", row(1.2, 1.15, 1.25), above[0], report.StatusRegression},
		{"beyond, interval holds 1", row(1.2, 0.9, 1.5), above[0], report.StatusNoise},
		{"faster is never a latency regression", row(0.7, 0.6, 0.8), above[0], report.StatusOK},
		{"throughput drop", row(0.9, 0.85, 0.95), below[0], report.StatusRegression},
		{"throughput drop within noise", row(0.9, 0.7, 1.1), below[0], report.StatusNoise},
		{"no interval", row(1.2, math.NaN(), math.NaN()), above[0], report.StatusNA},
		{"no ratio", Row{}, above[0], report.StatusNA},
	}
	for _, c := range cases {
		if got, _ := judge(c.row, c.rule); got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, got, c.want)
		}
	}
}

func TestAnalyzeRejectsOtherRuns(t *testing.T) {
	on := abRun(2, 1, 0, 0)
	delete(on.ByBackend, LabelB)
	if _, err := Analyze(on, stats("")); err == nil || !strings.Contains(err.Error(), "no side B") {
		t.Errorf("got %v, want an error naming side B", err)
	}
	st := stats("")
	st.Iterations = 10
	if _, err := Analyze(abRun(2, 1, 0, 0), st); err == nil || !strings.Contains(err.Error(), "--bootstrap-iterations") {
		t.Errorf("got %v, want an error naming --bootstrap-iterations", err)
	}
}
