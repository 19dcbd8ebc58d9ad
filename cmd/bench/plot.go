package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/roseinfer/roseinfer/plots"
	"github.com/roseinfer/roseinfer/results"
)

func init() { addCommand(newPlotCmd) }

// plotOptions are bench plot's flags (the original plot_compare.py's).
type plotOptions struct {
	online, offline   string
	onlineNoDefault   bool
	onlinePercentiles string
	outputDir         string
	formats           string
}

func newPlotCmd() *cobra.Command {
	var o plotOptions
	cmd := &cobra.Command{
		Use:   "plot --online FILE | --offline FILE [--output-dir DIR]",
		Short: "Draw the latency and throughput figures (PNG and SVG) of a run",
		Long: `Draw the original harness's figures from results files (ours or the original
Python harness's):

  online_latency_compare   TTFT, TPOT, ITL, E2E against trace scale (2x2): per backend
                           a p90 line with markers, a shaded p50-p90 band and hollow p99
                           markers; error bars for the 95% CI with --repeat rounds; a red X
                           on scales whose replay fell behind (invalid)
  online_<metric>_ms       the same, one metric per figure
  online_latency_<p>_only  only the p90 or p99 lines (--online-percentiles)
  offline_throughput_compare  output tok/s, req/s, total tok/s bars; failed runs tagged OOM/ERR

The online and offline summary Markdown files are written beside the figures
(not with --online-no-default). Figures go next to the first results file,
in figures/, unless --output-dir says otherwise.`,
		Example: `  bench plot --online R/online_results.json --offline R/offline_results.json --output-dir R/figures
  bench plot --online R/online_results.json --online-percentiles p90,p99
  bench plot --online old_run/online_results.json --online-no-default --online-percentiles p99`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := runPlot(cmd.OutOrStdout(), o)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.online, "online", "", "path to online_results.json")
	f.StringVar(&o.offline, "offline", "", "path to offline_results.json")
	f.BoolVar(&o.onlineNoDefault, "online-no-default", false, "write only the percentile-only online figures (no default figures or summary)")
	f.StringVar(&o.onlinePercentiles, "online-percentiles", "", `comma list of p90/p99: write online_latency_<p>_only for each`)
	f.StringVar(&o.outputDir, "output-dir", "", "directory for figures and summaries (default: figures/ beside the first results file)")
	f.StringVar(&o.formats, "format", "png,svg", "figure formats: png, svg or both")
	return cmd
}

// runPlot writes the figures (and summaries) and returns the paths written.
func runPlot(out io.Writer, o plotOptions) ([]string, error) {
	if o.online == "" && o.offline == "" {
		return nil, errors.New("plot: give --online and/or --offline")
	}
	percentiles, err := plots.ParsePercentiles(o.onlinePercentiles)
	if err != nil {
		return nil, fmt.Errorf("plot: --online-percentiles: %w", err)
	}
	formats := splitList(o.formats) // --format "png,svg"
	dir := o.outputDir
	if dir == "" {
		dir = filepath.Join(filepath.Dir(cmp.Or(o.online, o.offline)), "figures")
	}
	var written []string
	if o.online != "" {
		on, err := results.LoadOnline(o.online)
		if err != nil {
			return written, err
		}
		figs, err := plots.OnlineFigures(on, o.onlineNoDefault, percentiles)
		if err != nil {
			return written, fmt.Errorf("plot %s: %w", o.online, err)
		}
		paths, err := plots.WriteFiles(dir, figs, formats...)
		written = append(written, paths...)
		if err != nil {
			return written, err
		}
		if !o.onlineNoDefault {
			p := filepath.Join(dir, results.OnlineSummaryFile)
			if err := results.WriteAtomic(p, func(w io.Writer) error { return results.WriteOnlineSummary(w, on) }); err != nil {
				return written, err
			}
			written = append(written, p)
		}
	}
	if o.offline != "" {
		off, err := results.LoadOffline(o.offline)
		if err != nil {
			return written, err
		}
		fig, err := plots.OfflineThroughputCompare(off)
		if err != nil {
			return written, fmt.Errorf("plot %s: %w", o.offline, err)
		}
		paths, err := plots.WriteFiles(dir, []*plots.Figure{fig}, formats...)
		written = append(written, paths...)
		if err != nil {
			return written, err
		}
		p := filepath.Join(dir, results.OfflineSummaryFile)
		if err := results.WriteAtomic(p, func(w io.Writer) error { return results.WriteOfflineSummary(w, off) }); err != nil {
			return written, err
		}
		written = append(written, p)
	}
	for _, p := range written {
		fmt.Fprintln(out, "Wrote:", p)
	}
	return written, nil
}
