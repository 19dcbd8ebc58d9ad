package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/roseinfer/roseinfer/plots"
	"github.com/roseinfer/roseinfer/results"
)

func init() { addCommand(newReportCmd) }

func newReportCmd() *cobra.Command {
	var outputDir string
	cmd := &cobra.Command{
		Use:   "report RUN_DIR",
		Short: "Write the summary Markdown files, figures and a self-contained report.html for a run",
		Long: `Read RUN_DIR/online_results.json and/or RUN_DIR/offline_results.json (ours or the
original harness's) and write, into RUN_DIR (or --output-dir):

  online_summary.md, offline_summary.md   the original's tables
  figures/*.png, figures/*.svg            the default figures (see bench plot)
  report.html                             one file with the tables, the figures as inline
                                          SVG, replay fidelity (send lag), warnings for
                                          invalid scales and failed backends, run metadata
                                          and versions; opens in a browser with no network`,
		Example: `  bench report results/runs/online_20261120_010000
  bench report results/baselines/cpu-tiny --output-dir /tmp/cpu-report`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReport(cmd.OutOrStdout(), args[0], outputDir)
		},
	}
	cmd.Flags().StringVar(&outputDir, "output-dir", "", "where to write (default: RUN_DIR, or the file's directory)")
	return cmd
}

// runReport writes summaries, figures and report.html for the run at path.
func runReport(out io.Writer, path, outputDir string) error {
	on, off, err := results.LoadRun(path)
	if err != nil {
		return err
	}
	if outputDir == "" {
		outputDir = path
		if st, err := os.Stat(path); err == nil && !st.IsDir() {
			outputDir = filepath.Dir(path)
		}
	}
	in := results.ReportInput{RunDir: path, Online: on, Offline: off}
	var written []string
	var figs []*plots.Figure
	if on != nil {
		p := filepath.Join(outputDir, results.OnlineSummaryFile)
		if err := results.WriteAtomic(p, func(w io.Writer) error { return results.WriteOnlineSummary(w, on) }); err != nil {
			return err
		}
		written = append(written, p)
		online, err := plots.OnlineFigures(on, false, nil)
		if err != nil {
			return fmt.Errorf("report: %w", err)
		}
		figs = append(figs, online...)
	}
	if off != nil {
		p := filepath.Join(outputDir, results.OfflineSummaryFile)
		if err := results.WriteAtomic(p, func(w io.Writer) error { return results.WriteOfflineSummary(w, off) }); err != nil {
			return err
		}
		written = append(written, p)
		fig, err := plots.OfflineThroughputCompare(off)
		if err != nil {
			return fmt.Errorf("report: %w", err)
		}
		figs = append(figs, fig)
	}
	paths, err := plots.WriteFiles(filepath.Join(outputDir, "figures"), figs)
	written = append(written, paths...)
	if err != nil {
		return err
	}
	// The per-metric figures repeat the 2x2 one; the page embeds only the
	// overview figures.
	for _, f := range figs {
		if f.Name != "online_latency_compare" && f.Name != "offline_throughput_compare" {
			continue
		}
		svg, err := f.SVG()
		if err != nil {
			return err
		}
		in.Figures = append(in.Figures, results.ReportFigure{Name: f.Name, Caption: figureCaption(f.Name), SVG: svg})
	}
	var page bytes.Buffer
	if err := results.WriteReportHTML(&page, in); err != nil {
		return err
	}
	p := filepath.Join(outputDir, results.ReportFile)
	if err := results.WriteFileAtomic(p, page.Bytes()); err != nil {
		return err
	}
	written = append(written, p)
	for _, p := range written {
		fmt.Fprintln(out, "Wrote:", p)
	}
	return nil
}

func figureCaption(name string) string {
	switch name {
	case "online_latency_compare":
		return "Latency against trace scale (smaller scale = higher load): p90 line, p50–p90 band, hollow p99; error bars are 95% CIs over repeat rounds; a red X marks an invalid scale."
	case "offline_throughput_compare":
		return "Offline throughput per backend (rows in run order); failed runs are tagged OOM or ERR."
	}
	return name
}
