// Package report turns results files into what people read: the online and
// offline summary Markdown, the self-contained report.html, the figures of
// a run (drawn by plots), the comparison of two runs against --fail-on
// rules, and the profile stage's summaries (pprof top functions, trace phase
// totals, profile_summary.md).
//
// It sits above results (the schema: types, JSON read and write, merge)
// and plots (the figures); neither imports it. It computes no benchmark
// metric: every latency and throughput it shows was computed by
// harness/metrics and stored in the results files. The runners
// (harness/online, harness/offline, harness/profile) call it to write their
// summaries beside their results.
package report

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/roseinfer/roseinfer/plots"
	"github.com/roseinfer/roseinfer/results"
)

// FiguresDir is where Write puts the figure files, inside the output
// directory.
const FiguresDir = "figures"

// Write reads the run at path (a run directory or one results file, ours or
// the original harness's) and writes into outputDir ("" = the run directory,
// or the file's directory) the summary Markdown files, the default figures
// and report.html; a directory with bench capacity's capacity.json gets its
// summary, figure and section too. It returns the paths written.
func Write(path, outputDir string) ([]string, error) {
	on, off, err := results.LoadRun(path)
	if err != nil {
		return nil, err
	}
	if outputDir == "" {
		outputDir = path
		if st, err := os.Stat(path); err == nil && !st.IsDir() {
			outputDir = filepath.Dir(path)
		}
	}
	in := ReportInput{RunDir: path, Online: on, Offline: off}
	var written []string
	var figs []*plots.Figure
	if p := filepath.Join(path, results.CapacityFile); fileExists(p) {
		if in.Capacity, err = results.LoadCapacity(p); err != nil {
			return nil, err
		}
		s := filepath.Join(outputDir, CapacitySummaryFile)
		if err := results.WriteAtomic(s, func(w io.Writer) error { return WriteCapacitySummary(w, in.Capacity) }); err != nil {
			return written, err
		}
		written = append(written, s)
		fig, err := plots.CapacityGoodput(in.Capacity)
		switch {
		case err == nil:
			figs = append(figs, fig)
		case !errors.Is(err, plots.ErrNoCapacityData):
			return written, fmt.Errorf("report: %w", err)
		}
	}
	if on != nil {
		p := filepath.Join(outputDir, OnlineSummaryFile)
		if err := results.WriteAtomic(p, func(w io.Writer) error { return WriteOnlineSummary(w, on) }); err != nil {
			return written, err
		}
		written = append(written, p)
		// A run whose every backend failed has nothing to plot; its page
		// still says why, so that is no error.
		online, err := plots.OnlineFigures(on, false, nil)
		if err != nil && !errors.Is(err, plots.ErrNoOnlineData) {
			return written, fmt.Errorf("report: %w", err)
		}
		figs = append(figs, online...)
	}
	if off != nil {
		p := filepath.Join(outputDir, OfflineSummaryFile)
		if err := results.WriteAtomic(p, func(w io.Writer) error { return WriteOfflineSummary(w, off) }); err != nil {
			return written, err
		}
		written = append(written, p)
		fig, err := plots.OfflineThroughputCompare(off)
		switch {
		case err == nil:
			figs = append(figs, fig)
		case !errors.Is(err, plots.ErrNoOfflineData):
			return written, fmt.Errorf("report: %w", err)
		}
	}
	paths, err := plots.WriteFiles(filepath.Join(outputDir, FiguresDir), figs)
	written = append(written, paths...)
	if err != nil {
		return written, err
	}
	for _, p := range paths {
		if rel, err := filepath.Rel(outputDir, p); err == nil {
			in.FigureFiles = append(in.FigureFiles, filepath.ToSlash(rel))
		}
	}
	// The per-metric figures repeat the 2x2 one; the page embeds only the
	// overview figures.
	for _, f := range figs {
		if f.Name != "online_latency_compare" && f.Name != "offline_throughput_compare" && f.Name != "capacity_goodput" {
			continue
		}
		svg, err := f.SVG()
		if err != nil {
			return written, err
		}
		in.Figures = append(in.Figures, ReportFigure{Name: f.Name, Caption: figureCaption(f.Name), SVG: svg})
	}
	var page bytes.Buffer
	if err := WriteReportHTML(&page, in); err != nil {
		return written, err
	}
	p := filepath.Join(outputDir, ReportFile)
	if err := results.WriteFileAtomic(p, page.Bytes()); err != nil {
		return written, err
	}
	return append(written, p), nil
}

func figureCaption(name string) string {
	switch name {
	case "online_latency_compare":
		return "Latency against trace scale (smaller scale = higher load): p90 line, p50–p90 band, hollow p99; error bars are 95% CIs over repeat rounds; a red X marks an invalid scale."
	case "offline_throughput_compare":
		return "Offline throughput per backend (rows in run order); failed runs are tagged OOM or ERR."
	case "capacity_goodput":
		return "Share of requests meeting every SLO against offered load (log scale), one point per probe: filled passed, hollow failed, a red X where the client fell behind; the dashed lines mark the goodput target and each backend's capacity."
	}
	return name
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}
