package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/harness/report"
	"github.com/roseinfer/roseinfer/results"
)

// regressedRun writes a copy of the ours fixture with roseinfer's TTFT p99
// at scale 0.8 (and its CI) multiplied by factor.
func regressedRun(t *testing.T, factor float64) string {
	t.Helper()
	return editedRun(t, func(s *results.Summary) {
		v := *s.TTFTMs.P99 * factor
		s.TTFTMs.P99 = &v
		sp := s.Spread["ttft_ms.p99"]
		lo, hi := *sp.CILow*factor, *sp.CIHigh*factor
		sp.CILow, sp.CIHigh = &lo, &hi
		s.Spread["ttft_ms.p99"] = sp
	})
}

// nullRun writes a copy of the ours fixture whose roseinfer TTFT p99 at
// scale 0.8 is null (as when no request of a scale produced a token).
func nullRun(t *testing.T) string {
	t.Helper()
	return editedRun(t, func(s *results.Summary) { s.TTFTMs.P99 = nil; delete(s.Spread, "ttft_ms.p99") })
}

// editedRun writes a copy of the ours fixture with edit applied to
// roseinfer's summary at scale 0.8.
func editedRun(t *testing.T, edit func(*results.Summary)) string {
	t.Helper()
	on, err := results.LoadOnline(fixtureDir + "report_ours_online.json")
	if err != nil {
		t.Fatal(err)
	}
	for i := range on.Summaries {
		s := &on.Summaries[i]
		if s.Backend == "roseinfer" && s.Scale == 0.8 {
			edit(s)
		}
	}
	dir := t.TempDir()
	if err := results.WriteJSON(filepath.Join(dir, results.OnlineResultsFile), on); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCompareCommand(t *testing.T) {
	base := fixtureDir + "report_ours_online.json"
	const rules = "ttft_ms.p99>+5%,output_tok_s<-5%"
	cases := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
	}{
		{"same run", []string{"--baseline", base, "--current", base, "--fail-on", rules}, 0, "**no regression**"},
		{"+10% TTFT p99", []string{"--baseline", base, "--current", regressedRun(t, 1.10), "--fail-on", rules}, 1, "**REGRESSION** (1 of"},
		{"+1% inside overlapping CIs", []string{"--baseline", base, "--current", regressedRun(t, 1.01), "--fail-on", "ttft_ms.p99>+0.5%"}, 0, "within_noise"},
		{"--fail-on none: report only", []string{"--baseline", base, "--current", regressedRun(t, 1.5), "--fail-on", "none"}, 0, "+50.0%"},
		// Without --fail-on the default rules apply (they ran 0 checks before).
		{"default rules catch +50% TTFT p99", []string{"--baseline", base, "--current", regressedRun(t, 1.5)}, 1, "(the defaults; --fail-on names others)"},
		{"default rules: same run", []string{"--baseline", base, "--current", base}, 0, "**no regression**"},
		// A rule that cannot be evaluated is named, and exits 2, not "no regression".
		{"null in the baseline", []string{"--baseline", nullRun(t), "--current", base, "--fail-on", rules}, 2,
			"ttft_ms.p99>+5%: roseinfer scale 0.8: null in the baseline"},
		{"null in the baseline, default rules", []string{"--baseline", nullRun(t), "--current", base}, 2,
			"ttft_ms.p99>+10%: roseinfer scale 0.8: null in the baseline"},
		{"rule matches no metric", []string{"--baseline", base, "--current", base, "--fail-on", "total_s>+5%"}, 2,
			"total_s>+5%: matched no metric of these runs"},
		{"regression wins over not evaluated", []string{"--baseline", base, "--current", regressedRun(t, 1.5), "--fail-on", "ttft_ms.p99>+5%,total_s>+5%"}, 1, "**REGRESSION**"},
		{"missing baseline", []string{"--baseline", filepath.Join(t.TempDir(), "nope"), "--current", base}, 2, "baseline"},
		{"bad rule", []string{"--baseline", base, "--current", base, "--fail-on", "ttft>+10%"}, 2, "unknown metric"},
		{"nothing in common", []string{"--baseline", base, "--current", fixtureDir + "report_ours_offline.json"}, 2, "share no backend"},
		{"not results", []string{"--baseline", base, "--current", "compare.go"}, 2, "current"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, code := execBench(t, append([]string{"compare"}, c.args...)...)
			if code != c.wantCode {
				t.Errorf("exit %d, want %d:\n%s", code, c.wantCode, out)
			}
			if !strings.Contains(out, c.wantOut) {
				t.Errorf("output lacks %q:\n%s", c.wantOut, out)
			}
		})
	}
}

func TestCompareCommandJSON(t *testing.T) {
	out, code := execBench(t, "compare", "--baseline", fixtureDir+"report_ours_online.json",
		"--current", regressedRun(t, 1.2), "--fail-on", "ttft_ms.p99>+10%", "--json")
	if code != exitRegression {
		t.Fatalf("exit %d, want %d", code, exitRegression)
	}
	jsonPart := out[:strings.LastIndex(out, "}")+1]
	var c report.Comparison
	if err := json.Unmarshal([]byte(jsonPart), &c); err != nil {
		t.Fatalf("--json output does not parse: %v\n%s", err, out)
	}
	if c.Regressions != 1 {
		t.Errorf("regressions = %d, want 1", c.Regressions)
	}
}
