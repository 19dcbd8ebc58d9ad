package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/results"
)

// fixtures are the results files results/testdata holds (report_make_fixtures.py
// writes them); plots and cmd/bench read the same ones.
const fixtures = "../../results/testdata/"

func mustOnline(t *testing.T, path string) *results.Online {
	t.Helper()
	on, err := results.LoadOnline(path)
	if err != nil {
		t.Fatal(err)
	}
	return on
}

func mustOffline(t *testing.T, path string) *results.Offline {
	t.Helper()
	off, err := results.LoadOffline(path)
	if err != nil {
		t.Fatal(err)
	}
	return off
}

// scaleStat multiplies one summary's metric value (and its CI) by factor.
func scaleStat(t *testing.T, on *results.Online, backend string, scale float64, factor float64, withCI bool) {
	t.Helper()
	for i := range on.Summaries {
		s := &on.Summaries[i]
		if s.Backend != backend || s.Scale != scale {
			continue
		}
		v := *s.TTFTMs.P99 * factor
		s.TTFTMs.P99 = &v
		sp := s.Spread["ttft_ms.p99"]
		if !withCI {
			delete(s.Spread, "ttft_ms.p99")
			return
		}
		lo, hi, mean := *sp.CILow*factor, *sp.CIHigh*factor, *sp.Mean*factor
		s.Spread["ttft_ms.p99"] = results.Spread{Mean: &mean, CILow: &lo, CIHigh: &hi, Rounds: sp.Rounds}
		return
	}
	t.Fatalf("no summary %s@%g", backend, scale)
}

func TestCompareOnline(t *testing.T) {
	const fixture = fixtures + "report_ours_online.json"
	cases := []struct {
		name        string
		failOn      string
		factor      float64
		withCI      bool // current and baseline keep their 95% CIs
		dropBaseCI  bool
		wantStatus  string
		wantRegress int
	}{
		// Rounds CIs are ±4%: a +10% shift separates them.
		{"+10% p99 beyond +5% rule", "ttft_ms.p99>+5%", 1.10, true, false, StatusRegression, 1},
		{"+10.5% p99 beyond the issue's +10% rule", "ttft_ms.p99>+10%,output_tok_s<-5%", 1.105, true, false, StatusRegression, 1},
		{"+1% inside overlapping CIs is noise", "ttft_ms.p99>+0.5%", 1.01, true, false, StatusNoise, 0},
		{"+1% without rounds counts", "ttft_ms.p99>+0.5%", 1.01, false, true, StatusRegression, 1},
		{"+1% under a +10% rule", "ttft_ms.p99>+10%", 1.01, true, false, StatusOK, 0},
		{"improvement is fine", "ttft_ms.p99>+5%", 0.8, true, false, StatusOK, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rules, err := ParseFailOn(c.failOn)
			if err != nil {
				t.Fatal(err)
			}
			base, cur := mustOnline(t, fixture), mustOnline(t, fixture)
			scaleStat(t, cur, "roseinfer", 0.8, c.factor, c.withCI)
			if c.dropBaseCI {
				scaleStat(t, base, "roseinfer", 0.8, 1, false)
			}
			cmp, err := Compare(RunPair{Path: "base", Online: base}, RunPair{Path: "cur", Online: cur}, rules)
			if err != nil {
				t.Fatal(err)
			}
			if cmp.Regressions != c.wantRegress {
				t.Errorf("regressions = %d, want %d", cmp.Regressions, c.wantRegress)
			}
			row := findRow(t, cmp, "roseinfer", 0.8, "ttft_ms.p99")
			if row.Status != c.wantStatus {
				t.Errorf("status = %s, want %s (delta %v)", row.Status, c.wantStatus, *row.DeltaPct)
			}
			for _, r := range cmp.Rows {
				if r.Rule != "" && r.Status != StatusOK && !(r.Backend == "roseinfer" && *r.Scale == 0.8) {
					t.Errorf("untouched row %s@%v %s has status %s", r.Backend, *r.Scale, r.Metric, r.Status)
				}
			}
		})
	}
}

func findRow(t *testing.T, c *Comparison, backend string, scale float64, metric string) CompareRow {
	t.Helper()
	for _, r := range c.Rows {
		if r.Backend == backend && r.Metric == metric && r.Rule != "" && (r.Scale == nil || *r.Scale == scale) {
			return r
		}
	}
	t.Fatalf("no row %s@%g %s", backend, scale, metric)
	return CompareRow{}
}

func TestCompareOffline(t *testing.T) {
	const fixture = fixtures + "report_ours_offline.json"
	cases := []struct {
		name        string
		factor      float64
		wantStatus  string
		wantRegress int
	}{
		{"-10% output tok/s", 0.90, StatusRegression, 1},
		{"-2.5% output tok/s", 0.975, StatusNoise, 0}, // CIs of ±1.5% still overlap
		{"+20% output tok/s", 1.2, StatusOK, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rules, _ := ParseFailOn("output_tok_s<-2%")
			base, cur := mustOffline(t, fixture), mustOffline(t, fixture)
			r := &cur.Results[3] // vllm
			r.OutputThroughputTPS *= c.factor
			sp := r.Spread["output_throughput_tps"]
			lo, hi := *sp.CILow*c.factor, *sp.CIHigh*c.factor
			sp.CILow, sp.CIHigh = &lo, &hi
			r.Spread["output_throughput_tps"] = sp
			cmp, err := Compare(RunPair{Offline: base}, RunPair{Offline: cur}, rules)
			if err != nil {
				t.Fatal(err)
			}
			if cmp.Regressions != c.wantRegress {
				t.Errorf("regressions = %d, want %d", cmp.Regressions, c.wantRegress)
			}
			if row := findRow(t, cmp, "vllm", 0, "output_throughput_tps"); row.Status != c.wantStatus {
				t.Errorf("status = %s, want %s", row.Status, c.wantStatus)
			}
		})
	}
}

func TestCompareMissingAndFailed(t *testing.T) {
	rules, _ := ParseFailOn("ttft_ms.p99>+10%,output_tok_s<-5%")
	base := mustOnline(t, fixtures+"report_original_online.json")
	cur := mustOnline(t, fixtures+"report_original_online.json")
	// vllm vanished from the current run.
	kept := cur.Summaries[:0]
	for _, s := range cur.Summaries {
		if s.Backend != "vllm" {
			kept = append(kept, s)
		}
	}
	cur.Summaries = kept
	cmp, err := Compare(RunPair{Online: base}, RunPair{Online: cur}, rules)
	if err != nil {
		t.Fatal(err)
	}
	// 3 scales × 2 rules for the missing backend; trtllm failed in both runs
	// (NaN everywhere) and is not a regression.
	if cmp.Regressions != 6 {
		t.Errorf("regressions = %d, want 6", cmp.Regressions)
	}
	if row := findRow(t, cmp, "trtllm", 0.8, "ttft_ms.p99"); row.Status != StatusNA {
		t.Errorf("trtllm failed in both: status %s, want %s", row.Status, StatusNA)
	}
	if row := findRow(t, cmp, "vllm", 0.4, "ttft_ms.p99"); row.Status != StatusMissing {
		t.Errorf("vanished backend: status %s, want %s", row.Status, StatusMissing)
	}
}

func TestCompareOriginalAgainstItself(t *testing.T) {
	rules, _ := ParseFailOn("ttft_ms.p99>+1%,itl_ms.p90>+1%,output_tok_s<-1%")
	for _, f := range []string{"report_original_online.json", "report_original_single.json", "report_ours_online.json"} {
		on := mustOnline(t, fixtures+f)
		cmp, err := Compare(RunPair{Online: on}, RunPair{Online: on}, rules)
		if err != nil {
			t.Fatal(err)
		}
		if cmp.Regressions != 0 || cmp.Checks == 0 {
			t.Errorf("%s vs itself: %d regressions in %d checks", f, cmp.Regressions, cmp.Checks)
		}
	}
}

func TestCompareNothingInCommon(t *testing.T) {
	on := mustOnline(t, fixtures+"report_ours_online.json")
	off := mustOffline(t, fixtures+"report_ours_offline.json")
	if _, err := Compare(RunPair{Online: on}, RunPair{Offline: off}, nil); !errors.Is(err, ErrNothingToCompare) {
		t.Errorf("err = %v, want ErrNothingToCompare", err)
	}
}

func TestParseFailOn(t *testing.T) {
	cases := []struct {
		spec    string
		want    string
		wantErr bool
	}{
		{"ttft_ms.p99>+10%,output_tok_s<-5%", "ttft_ms.p99>+10%,output_tok_s<-5%", false},
		{" e2e_ms.mean > 3 % ", "e2e_ms.mean>+3%", false},
		{"", "", false},
		{"ttft_ms.p95>+10%", "", true},
		{"latency>+10%", "", true},
		{"ttft_ms.p99=+10%", "", true},
		{"ttft_ms.p99>ten%", "", true},
		{">+10%", "", true},
	}
	for _, c := range cases {
		rules, err := ParseFailOn(c.spec)
		if (err != nil) != c.wantErr {
			t.Errorf("ParseFailOn(%q) err = %v, wantErr %v", c.spec, err, c.wantErr)
			continue
		}
		var got []string
		for _, r := range rules {
			got = append(got, r.String())
		}
		if strings.Join(got, ",") != c.want {
			t.Errorf("ParseFailOn(%q) = %v, want %s", c.spec, got, c.want)
		}
	}
}

func TestCompareOutputs(t *testing.T) {
	rules, _ := ParseFailOn("ttft_ms.p99>+5%")
	base, cur := mustOnline(t, fixtures+"report_ours_online.json"), mustOnline(t, fixtures+"report_ours_online.json")
	scaleStat(t, cur, "vllm", 1.6, 1.2, true)
	cmp, err := Compare(RunPair{Path: "b", Online: base}, RunPair{Path: "c", Online: cur}, rules)
	if err != nil {
		t.Fatal(err)
	}
	var md bytes.Buffer
	if err := cmp.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"**REGRESSION** (1 of 12 checks)", "## Regressions", "| online | vLLM | 1.60 | ttft_ms.p99 | 48.00 | 57.60 | +20.0% |",
		"current scale invalid: send lag p99 7.50 ms > 5 ms"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md.String())
		}
	}
	var js bytes.Buffer
	if err := cmp.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Comparison
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatalf("JSON output does not parse: %v", err)
	}
	if back.Regressions != 1 || len(back.Rows) != len(cmp.Rows) {
		t.Errorf("JSON round trip: %d regressions, %d rows", back.Regressions, len(back.Rows))
	}
}
