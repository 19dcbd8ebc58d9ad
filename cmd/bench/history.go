package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/roseinfer/roseinfer/harness/history"
	"github.com/roseinfer/roseinfer/plots"
	"github.com/roseinfer/roseinfer/results"
)

func init() { addCommand(newHistoryCmd) }

type historyOptions struct {
	file, add, outputDir string
	keep                 int
}

func newHistoryCmd() *cobra.Command {
	var o historyOptions
	cmd := &cobra.Command{
		Use:   "history --file FILE [--add RUN] [--output-dir DIR]",
		Short: "Chart absolute figures across runs (the nightly job's history)",
		Long: `Keep a run-by-run history of absolute figures in a JSON Lines file and chart it.

--add RUN appends a run (a run directory with online_results.json and/or
offline_results.json, or one results file): per backend and scale its TTFT
p90, TPOT p90, ITL p99, E2E p90 and output tok/s, and each offline result's
output throughput, with the run's start time and git revision. --output-dir
DIR writes DIR/history.png and DIR/history.svg: one panel per figure, one line
per backend and scale, the runs in file order. --keep N keeps the last N runs.

The history is a chart, not a gate: absolute figures move with the machine
that measured them. The nightly gate is bench ab, yesterday's commit against
today's on one machine.`,
		Example: `  bench history --file history.jsonl --add "$NIGHT_DIR" --output-dir "$NIGHT_DIR/history"`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runHistory(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.file, "file", "", "the history file (JSON Lines; created by the first --add) (required)")
	f.StringVar(&o.add, "add", "", "append this run (run directory or results file)")
	f.StringVar(&o.outputDir, "output-dir", "", "write history.png and history.svg here")
	f.IntVar(&o.keep, "keep", 365, "keep the last N runs (0: all)")
	cmd.MarkFlagRequired("file")
	return cmd
}

func runHistory(cmd *cobra.Command, o historyOptions) error {
	if o.keep < 0 {
		return fmt.Errorf("--keep %d: must not be negative", o.keep)
	}
	entries, err := history.Load(o.file)
	if err != nil {
		return err
	}
	if o.add != "" {
		on, off, err := results.LoadRun(o.add)
		if err != nil {
			return fmt.Errorf("--add: %w", err)
		}
		e, err := history.FromRun(on, off)
		if err != nil {
			return fmt.Errorf("--add %s: %w", o.add, err)
		}
		entries = append(entries, e)
		if err := history.Save(o.file, entries, o.keep); err != nil {
			return err
		}
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s: %d runs\n", o.file, len(entries))
	if o.outputDir == "" {
		return nil
	}
	fig, err := plots.History(history.Chart(entries))
	if err != nil {
		return err
	}
	paths, err := plots.WriteFiles(o.outputDir, []*plots.Figure{fig})
	for _, p := range paths {
		fmt.Fprintln(cmd.OutOrStdout(), p)
	}
	return err
}
