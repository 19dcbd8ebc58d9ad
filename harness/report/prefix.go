package report

import (
	"fmt"
	"io"

	"github.com/olekukonko/tablewriter/tw"

	"github.com/roseinfer/roseinfer/results"
)

// writePrefixCache writes, after the latency table, one row per (scale,
// backend) comparing the prefix-cache hits the server reported with those
// the workload implies (docs/METRICS.md "Prefix cache"); nothing when no
// summary has the figures.
func writePrefixCache(w io.Writer, rows []results.Summary) error {
	header := []string{"scale", "backend", "requests (later turns)", "prompt tokens", "implied hit rate",
		"measured hit rate", "implied hits found"}
	align := []tw.Align{tw.AlignRight, tw.AlignLeft, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight,
		tw.AlignRight}
	var cells [][]string
	for _, s := range rows {
		pc := s.PrefixCache
		if pc == nil {
			continue
		}
		cells = append(cells, []string{
			fmt.Sprintf("%.2f", s.Scale),
			results.BackendDisplayName(s.Backend),
			fmt.Sprintf("%d (%d)", pc.NumRequests, pc.NumSessionTurns),
			fmt.Sprint(pc.PromptTokens),
			percentOf(pc.ImpliedHitRate),
			percentOf(pc.MeasuredHitRate),
			percentOf(pc.ImpliedHitsFound),
		})
	}
	if len(cells) == 0 {
		return nil
	}
	if _, err := io.WriteString(w, "\nPrefix cache (\"-\": the server reports no cached tokens):\n\n"); err != nil {
		return err
	}
	return renderMarkdown(w, header, align, cells)
}

func percentOf(f *float64) string {
	if f == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", *f*100)
}
