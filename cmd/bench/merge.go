package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/roseinfer/roseinfer/results"
)

func init() { addCommand(newMergeCmd) }

func newMergeCmd() *cobra.Command {
	var kind, out string
	cmd := &cobra.Command{
		Use:   "merge --kind online|offline --out PATH INPUT...",
		Short: "Merge the results files of several runs into one",
		Long: `Merge results files, as the original merge_results.py: later inputs override
earlier duplicates. Online: summaries keyed by (backend, scale), sorted by scale
then backend; by_backend merged by label. Offline: results keyed by backend,
sorted by label. meta is the first input's, plus merged_from (the input paths)
and backends (the sorted labels).`,
		Example: `  bench merge --kind online --out merged.json runA/online_results.json runB/online_results.json
  bench merge --kind offline --out all_offline.json results/runs/offline_*/offline_results.json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, inputs []string) error {
			if err := results.MergeFiles(kind, out, inputs); err != nil {
				return err
			}
			fmt.Println(out)
			return nil
		},
	}
	cmd.Flags().StringVar(&kind, "kind", "", "online or offline (required)")
	cmd.Flags().StringVar(&out, "out", "", "output path (required)")
	cmd.MarkFlagRequired("kind")
	cmd.MarkFlagRequired("out")
	return cmd
}
