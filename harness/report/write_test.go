package report_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/harness/report"
	"github.com/roseinfer/roseinfer/results"
)

// A run interrupted before its first backend (and its offline part before
// its first row) has nothing to plot; Write still writes the page, with no
// figure, instead of failing on the empty results.
func TestWriteNothingToPlot(t *testing.T) {
	dir := t.TempDir()
	on := &results.Online{Meta: map[string]any{"interrupted": true}, ByBackend: map[string]*results.Backend{}}
	if err := results.WriteJSON(filepath.Join(dir, results.OnlineResultsFile), on); err != nil {
		t.Fatal(err)
	}
	off := &results.Offline{Meta: map[string]any{"interrupted": true}, Results: []results.OfflineResult{}}
	if err := results.WriteJSON(filepath.Join(dir, results.OfflineResultsFile), off); err != nil {
		t.Fatal(err)
	}
	if _, err := report.Write(dir, ""); err != nil {
		t.Fatalf("Write: %v", err)
	}
	page, err := os.ReadFile(filepath.Join(dir, report.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<section id="online">`, `<section id="offline">`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("report.html lacks %s", want)
		}
	}
	if strings.Contains(string(page), "<figure") || strings.Contains(string(page), "Figure files") {
		t.Error("report.html shows a figure of a run with nothing to plot")
	}
}

// The page links every figure file Write drew, each under its own section,
// with a path relative to the page.
func TestWriteLinksEveryFigure(t *testing.T) {
	dir := t.TempDir()
	for name, fixture := range map[string]string{results.OnlineResultsFile: "report_ours_online.json",
		results.OfflineResultsFile: "report_ours_offline.json"} {
		data, err := os.ReadFile(fixtures + fixture)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := report.Write(dir, ""); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(dir, report.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, report.FiguresDir, "*"))
	if len(files) != 12 { // 5 online figures and 1 offline, PNG and SVG each
		t.Fatalf("%d figure files, want 12", len(files))
	}
	online, offline, _ := strings.Cut(string(page), `<section id="offline">`)
	for _, f := range files {
		link := `href="` + report.FiguresDir + "/" + filepath.Base(f) + `"`
		section := online
		if strings.HasPrefix(filepath.Base(f), "offline_") {
			section = offline
		}
		if !strings.Contains(section, link) {
			t.Errorf("report.html's %s section does not link %s", strings.SplitN(filepath.Base(f), "_", 2)[0], link)
		}
	}
}
