package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/roseinfer/roseinfer/harness/report"
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
                                          and versions; opens in a browser with no network

A bench capacity run directory (capacity.json beside online_results.json) also
gets capacity_summary.md, figures/capacity_goodput.* and a Capacity section.`,
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
	written, err := report.Write(path, outputDir)
	if err != nil {
		return err
	}
	for _, p := range written {
		fmt.Fprintln(out, "Wrote:", p)
	}
	return nil
}
