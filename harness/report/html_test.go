package report_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/harness/report"
	"github.com/roseinfer/roseinfer/harness/report/reporttest"
	"github.com/roseinfer/roseinfer/plots"
	"github.com/roseinfer/roseinfer/results"
)

// fixtures are the results files results/testdata holds (report_make_fixtures.py
// writes them); plots and cmd/bench read the same ones.
const fixtures = "../../results/testdata/"

// reportInput builds a report input with real figures from the plots package.
func reportInput(t *testing.T, onlinePath, offlinePath string) report.ReportInput {
	t.Helper()
	in := report.ReportInput{RunDir: "testdata"}
	var figs []*plots.Figure
	if onlinePath != "" {
		on, err := results.LoadOnline(onlinePath)
		if err != nil {
			t.Fatal(err)
		}
		in.Online = on
		f, err := plots.OnlineLatencyCompare(on)
		if err != nil {
			t.Fatal(err)
		}
		figs = append(figs, f)
	}
	if offlinePath != "" {
		off, err := results.LoadOffline(offlinePath)
		if err != nil {
			t.Fatal(err)
		}
		in.Offline = off
		f, err := plots.OfflineThroughputCompare(off)
		if err != nil {
			t.Fatal(err)
		}
		figs = append(figs, f)
	}
	for _, f := range figs {
		svg, err := f.SVG()
		if err != nil {
			t.Fatal(err)
		}
		in.Figures = append(in.Figures, report.ReportFigure{Name: f.Name, Caption: f.Name, SVG: svg})
	}
	return in
}

func render(t *testing.T, in report.ReportInput) string {
	t.Helper()
	var b bytes.Buffer
	if err := report.WriteReportHTML(&b, in); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestReportHTML(t *testing.T) {
	cases := []struct {
		name            string
		online, offline string
		want            []string
		wantSVG         int
	}{
		{
			name: "ours", online: fixtures + "report_ours_online.json", offline: fixtures + "report_ours_offline.json",
			want: []string{
				"<h3>Online Serving Benchmark Summary</h3>", "<h3>Offline Throughput Benchmark Summary</h3>",
				"<strong>Invalid scale</strong>: vLLM at scale 0.4", "Offline roseinfer (flash-attn, -fused ops) failed",
				`<tr class="invalid">`, "Replay fidelity", "0.05/7.50/8.25", "<th>roseinfer</th><td><code>0.1.0</code>",
				"NVIDIA H100 80GB HBM3", "roseinfer (flash-attn)", "<code>gpt2</code>",
			},
			wantSVG: 2,
		},
		{
			name: "original online only", online: fixtures + "report_original_online.json",
			want: []string{
				"<th>rosellm</th><td><code>0.1.0</code>", "TensorRT-LLM at scale 0.4: 50 of 50 requests failed.",
				"roseinfer (-fused ops)",
			},
			wantSVG: 1,
		},
		{
			name: "original offline only", offline: fixtures + "report_original_offline.json",
			want:    []string{"Offline SGLang failed</strong>: ImportError: No module named sglang"},
			wantSVG: 1,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := reportInput(t, c.online, c.offline)
			page := render(t, in)
			for _, w := range c.want {
				if !strings.Contains(page, w) {
					t.Errorf("report lacks %q", w)
				}
			}
			if got := strings.Count(page, "<svg "); got != c.wantSVG {
				t.Errorf("inline SVGs = %d, want %d", got, c.wantSVG)
			}
			// Self-contained: no script, no external resource, no XML prolog.
			for _, bad := range []string{"<script", "<?xml", "src=", "<link", "@import", "href=\"http"} {
				if strings.Contains(page, bad) {
					t.Errorf("report contains %q", bad)
				}
			}
			if again := render(t, in); again != page {
				t.Error("rendering twice gave different pages")
			}
		})
	}
	if err := report.WriteReportHTML(&bytes.Buffer{}, report.ReportInput{}); !errors.Is(err, results.ErrNoResults) {
		t.Errorf("empty input: err = %v, want ErrNoResults", err)
	}
}

func TestReportOpensInChromium(t *testing.T) {
	bin := reporttest.RequireChromium(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	html := render(t, reportInput(t, fixtures+"report_ours_online.json", fixtures+"report_ours_offline.json"))
	if err := os.WriteFile(page, []byte(html), 0o644); err != nil {
		t.Fatal(err)
	}
	// Control: a page with a script error must be caught, or this test
	// could never fail.
	bad := filepath.Join(dir, "bad.html")
	if err := os.WriteFile(bad, []byte(`<!DOCTYPE html><p>x</p><script>throw new Error("control")</script>`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, console := reporttest.Open(t, bin, bad); len(console) == 0 {
		t.Fatal("control page's uncaught error was not seen in Chromium's console log")
	}

	dom, console := reporttest.Open(t, bin, page)
	if len(console) > 0 {
		t.Errorf("console messages opening report.html:\n%s", strings.Join(console, "\n"))
	}
	if got := strings.Count(dom, "<svg "); got != 2 {
		t.Errorf("DOM has %d SVG figures, want 2", got)
	}
	if got := strings.Count(dom, "<table"); got < 6 {
		t.Errorf("DOM has %d tables, want at least 6", got)
	}
	if !strings.Contains(dom, "p50–p90 (band)") {
		t.Error("figure legend text missing from the DOM")
	}
}
