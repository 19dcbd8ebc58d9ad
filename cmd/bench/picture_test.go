package main

import (
	"context"
	"encoding/xml"
	"errors"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/harness/backend/backendtest"
	"github.com/roseinfer/roseinfer/harness/report/reporttest"
	"github.com/roseinfer/roseinfer/results"
)

// figureFiles are the files bench online's report draws for a run with
// online and offline results: five online figures and one offline, each
// as PNG and SVG.
var figureFiles = []string{
	"online_latency_compare", "online_ttft_ms", "online_tpot_ms", "online_itl_ms", "online_e2e_ms",
	"offline_throughput_compare",
}

// TestOnlineWholePicture runs bench online against the real roseinfer
// server on the sim device: with --offline it leaves both results, both
// summaries, every figure (PNGs that decode, SVGs that parse) and one
// report.html that embeds the overview figures, links every figure file and
// opens in Chromium with both drawn; the console ends with the tables and
// the paths. With --no-report it leaves the results and no figure or page.
func TestOnlineWholePicture(t *testing.T) {
	if testing.Short() {
		t.Skip("runs bench online and offline against roseinfer on the sim device")
	}
	bin := buildRoseinfer(t)
	t.Cleanup(func() {
		for _, p := range processesRunning(bin) {
			t.Errorf("left running: %s", p)
		}
	})
	sig = interrupts{stop: context.Background(), abort: context.Background()}
	tracePath := backendtest.BurstTrace(t, 20, func(i int) (float64, int, int) { // 20 req/s for 1 s
		return float64(i) / 20, 16 + i, 16
	})
	args := func(outDir string, extra ...string) []string {
		return append([]string{"online", "--device", "sim", "--server-args", "--sim-step-us 1000", "--roseinfer-bin", bin,
			"--trace", tracePath, "--n", "20", "--scales", "0.5,1", "--ignore-eos", "--warmup-requests", "1",
			"--start-offset-s", "0.1", "--port-base", strconv.Itoa(backendtest.PortBase(t)), "--output-dir", outDir,
			// The default CPU split would pin this test process (bench runs
			// in it) and the children of the tests after it.
			"--server-cpus", "none", "--client-cpus", "none"}, extra...)
	}

	t.Run("offline and report", func(t *testing.T) {
		outDir := t.TempDir()
		out, code := execBench(t, args(outDir, "--offline")...)
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		runDir := onlyRunDir(t, outDir)
		for _, name := range []string{results.OnlineResultsFile, "online_summary.md", results.OfflineResultsFile,
			"offline_summary.md", "roseinfer.server.log", "roseinfer+server.server.log", "report.html"} {
			if _, err := os.Stat(filepath.Join(runDir, name)); err != nil {
				t.Errorf("run directory lacks %s: %v", name, err)
			}
		}
		off, err := results.LoadOffline(filepath.Join(runDir, results.OfflineResultsFile))
		if err != nil || len(off.Results) != 2 {
			t.Fatalf("offline results: %v, %+v", err, off)
		}
		checkFigures(t, filepath.Join(runDir, "figures"))
		checkReport(t, filepath.Join(runDir, "report.html"))

		// The console's last word: the online table, the offline table,
		// then the paths, the results file first.
		want := []string{filepath.Join(runDir, results.OnlineResultsFile), filepath.Join(runDir, "online_summary.md"),
			filepath.Join(runDir, results.OfflineResultsFile), filepath.Join(runDir, "offline_summary.md"),
			filepath.Join(runDir, "figures") + "/", filepath.Join(runDir, "report.html")}
		checkConsoleEnd(t, out, want, "# Online Serving Benchmark Summary", "# Offline Throughput Benchmark Summary")
	})

	t.Run("no-report", func(t *testing.T) {
		outDir := t.TempDir()
		out, code := execBench(t, args(outDir, "--no-report")...)
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		runDir := onlyRunDir(t, outDir)
		if _, err := results.LoadOnline(filepath.Join(runDir, results.OnlineResultsFile)); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"figures", "report.html", results.OfflineResultsFile} {
			if _, err := os.Stat(filepath.Join(runDir, name)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("--no-report left %s (stat: %v)", name, err)
			}
		}
		checkConsoleEnd(t, out, []string{filepath.Join(runDir, results.OnlineResultsFile),
			filepath.Join(runDir, "online_summary.md")}, "# Online Serving Benchmark Summary")
	})
}

// --offline with what it cannot measure is refused before anything runs.
func TestOnlineOfflineFlagRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--base-url", "http://127.0.0.1:1"}, "--base-url"},
		{[]string{"--backends", "roseinfer,vllm"}, "--backends roseinfer,vllm"},
		{[]string{"--profile", "pprof", "--profile-only"}, "--profile-only"},
	} {
		outDir := t.TempDir()
		out, code := execBench(t, append([]string{"online", "--offline", "--output-dir", outDir}, c.args...)...)
		if code == 0 || !strings.Contains(out, "--offline") || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, want an error naming --offline and %s:\n%s", c.args, code, c.want, out)
		}
		if entries, _ := os.ReadDir(outDir); len(entries) != 0 {
			t.Errorf("%v: a refused run created %d entries", c.args, len(entries))
		}
	}
}

func onlyRunDir(t *testing.T, outDir string) string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(outDir, "online_*"))
	if len(dirs) != 1 {
		t.Fatalf("run directories %v, want one", dirs)
	}
	return dirs[0]
}

// checkFigures: exactly the expected figure files, every PNG decodes and
// every SVG is well-formed XML with an <svg> root.
func checkFigures(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2*len(figureFiles) {
		t.Errorf("%d figure files, want %d", len(entries), 2*len(figureFiles))
	}
	for _, name := range figureFiles {
		f, err := os.Open(filepath.Join(dir, name+".png"))
		if err != nil {
			t.Error(err)
			continue
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil || img.Bounds().Dx() < 500 {
			t.Errorf("%s.png: %v", name, err)
		}
		data, err := os.ReadFile(filepath.Join(dir, name+".svg"))
		if err != nil {
			t.Error(err)
			continue
		}
		if root, err := xmlRoot(data); err != nil || root != "svg" {
			t.Errorf("%s.svg: root %q, %v", name, root, err)
		}
	}
}

// xmlRoot parses a whole XML document and returns its root element's name.
func xmlRoot(data []byte) (string, error) {
	dec := xml.NewDecoder(strings.NewReader(string(data)))
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return root, nil
		}
		if err != nil {
			return root, err
		}
		if el, ok := tok.(xml.StartElement); ok && root == "" {
			root = el.Name.Local
		}
	}
}

// checkReport: one page with an online and an offline section, the two
// overview figures inline (and well-formed), every figure file linked, and,
// where Chromium is installed, opening with no console message and both
// figures in the DOM.
func checkReport(t *testing.T, page string) {
	t.Helper()
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	html := string(data)
	for _, want := range []string{`<section id="online">`, `<section id="offline">`} {
		if !strings.Contains(html, want) {
			t.Errorf("report.html lacks %s", want)
		}
	}
	for _, name := range []string{"online_latency_compare", "offline_throughput_compare"} {
		_, fig, ok := strings.Cut(html, `<figure id="fig-`+name+`">`)
		svg, _, ok2 := strings.Cut(fig, "</svg>")
		if !ok || !ok2 {
			t.Errorf("report.html does not embed %s", name)
			continue
		}
		if root, err := xmlRoot([]byte(strings.TrimSpace(svg) + "</svg>")); err != nil || root != "svg" {
			t.Errorf("%s inline: root %q, %v", name, root, err)
		}
	}
	for _, name := range figureFiles {
		for _, ext := range []string{".png", ".svg"} {
			if !strings.Contains(html, `href="figures/`+name+ext+`"`) {
				t.Errorf("report.html does not link figures/%s%s", name, ext)
			}
		}
	}
	for _, loads := range []string{" src=", "<link", "@import"} {
		if strings.Contains(html, loads) {
			t.Errorf("report.html loads a resource (%s): it must open with no other file", loads)
		}
	}

	bin := reporttest.Chromium()
	if bin == "" {
		t.Log("chromium not installed; report.html not opened in a browser")
		return
	}
	dom, console := reporttest.Open(t, bin, page)
	if len(console) > 0 {
		t.Errorf("console messages opening report.html:\n%s", strings.Join(console, "\n"))
	}
	if got := strings.Count(dom, "<svg "); got != 2 {
		t.Errorf("Chromium's DOM has %d SVG figures, want 2", got)
	}
}

// checkConsoleEnd: the output ends with the paths, one per line, each
// existing, and the tables (titles, in order) come just before them.
func checkConsoleEnd(t *testing.T, out string, paths []string, titles ...string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) < len(paths) {
		t.Fatalf("output too short:\n%s", out)
	}
	tail := lines[len(lines)-len(paths):]
	for i, p := range paths {
		if tail[i] != p {
			t.Errorf("output line %d from the end is %q, want %q", len(paths)-i, tail[i], p)
		}
		if _, err := os.Stat(p); err != nil {
			t.Errorf("printed path: %v", err)
		}
	}
	head := strings.Join(lines[:len(lines)-len(paths)], "\n")
	at := 0
	for _, title := range titles {
		i := strings.LastIndex(head, title)
		if i < at {
			t.Errorf("table %q not printed before the paths (in order)", title)
		}
		at = i
	}
	if !strings.HasSuffix(strings.TrimSpace(head), "|") {
		t.Errorf("the last thing before the paths is not a table row:\n%s", head[max(0, len(head)-400):])
	}
}
