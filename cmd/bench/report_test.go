package main

import (
	"bytes"
	"errors"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/results"
)

const fixtureDir = "../../results/testdata/"

// execBench runs bench in-process and returns its output and exit status.
func execBench(t *testing.T, args ...string) (string, int) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	var ee *exitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &ee):
		return out.String() + ee.msg, ee.code
	}
	return out.String() + err.Error(), exitFailed
}

func copyFixture(t *testing.T, name, to string) {
	t.Helper()
	data, err := os.ReadFile(fixtureDir + name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReportCommand(t *testing.T) {
	run := t.TempDir()
	copyFixture(t, "report_ours_online.json", filepath.Join(run, results.OnlineResultsFile))
	copyFixture(t, "report_original_offline.json", filepath.Join(run, results.OfflineResultsFile))
	out, code := execBench(t, "report", run)
	if code != 0 {
		t.Fatalf("bench report exited %d:\n%s", code, out)
	}
	for _, name := range []string{"report.html", "online_summary.md", "offline_summary.md",
		"figures/online_latency_compare.png", "figures/online_latency_compare.svg", "figures/online_e2e_ms.svg",
		"figures/offline_throughput_compare.png"} {
		if _, err := os.Stat(filepath.Join(run, name)); err != nil {
			t.Errorf("missing %s: %v", name, err)
		}
	}
	page, _ := os.ReadFile(filepath.Join(run, "report.html"))
	if n := strings.Count(string(page), "<svg "); n != 2 {
		t.Errorf("report.html embeds %d figures, want 2", n)
	}
	if _, code := execBench(t, "report", t.TempDir()); code == 0 {
		t.Error("bench report on an empty directory succeeded")
	}
}

func TestPlotCommand(t *testing.T) {
	dir := t.TempDir()
	out, code := execBench(t, "plot", "--online", fixtureDir+"report_original_online.json",
		"--offline", fixtureDir+"report_ours_offline.json", "--online-percentiles", "p90,99", "--output-dir", dir, "--format", "png")
	if code != 0 {
		t.Fatalf("bench plot exited %d:\n%s", code, out)
	}
	want := []string{"online_latency_compare.png", "online_ttft_ms.png", "online_tpot_ms.png", "online_itl_ms.png",
		"online_e2e_ms.png", "online_latency_p90_only.png", "online_latency_p99_only.png", "online_summary.md",
		"offline_throughput_compare.png", "offline_summary.md"}
	for _, name := range want {
		if !strings.Contains(out, filepath.Join(dir, name)) {
			t.Errorf("output does not list %s", name)
		}
	}
	f, err := os.Open(filepath.Join(dir, "online_latency_p99_only.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if img, err := png.Decode(f); err != nil || img.Bounds().Dx() != 2750 {
		t.Errorf("p99-only PNG: err %v", err)
	}

	// --online-no-default: only the percentile figure, no summary.
	only := t.TempDir()
	if out, code := execBench(t, "plot", "--online", fixtureDir+"report_original_single.json", "--online-no-default",
		"--online-percentiles", "p99", "--output-dir", only); code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	entries, _ := os.ReadDir(only)
	if len(entries) != 2 { // png + svg
		t.Errorf("--online-no-default wrote %d files, want 2", len(entries))
	}

	for _, args := range [][]string{
		{"plot"},
		{"plot", "--online", fixtureDir + "report_original_single.json", "--online-percentiles", "p50"},
		{"plot", "--online", filepath.Join(dir, "absent.json")},
	} {
		if _, code := execBench(t, args...); code == 0 {
			t.Errorf("bench %v succeeded", args)
		}
	}
}
