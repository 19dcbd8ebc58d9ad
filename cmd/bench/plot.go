package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/roseinfer/roseinfer/harness/report"
	"github.com/roseinfer/roseinfer/plots"
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
	written, err := report.Plot(report.PlotOptions{Online: o.online, Offline: o.offline, OnlineNoDefault: o.onlineNoDefault,
		OnlinePercentiles: percentiles, OutputDir: o.outputDir, Formats: splitList(o.formats)})
	if err != nil {
		return written, err
	}
	for _, p := range written {
		fmt.Fprintln(out, "Wrote:", p)
	}
	return written, nil
}
