package report

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter/tw"

	"github.com/roseinfer/roseinfer/results"
)

// writeITLOutliers adds, after the table, the ITL outliers of each row
// that has them (bench online --timeline): how many token chunks were
// above the round's ITL p99 and which engine steps they fell in
// (docs/TIMELINE.md names the causes).
func writeITLOutliers(w io.Writer, rows []results.Summary) error {
	var cells [][]string
	for _, s := range rows {
		o := s.ITLOutliers
		if o == nil {
			continue
		}
		threshold := "per round"
		if o.ThresholdMs != nil {
			threshold = strconv.FormatFloat(*o.ThresholdMs, 'f', 2, 64)
		}
		cells = append(cells, []string{fmt.Sprintf("%.2f", s.Scale), results.BackendDisplayName(s.Backend),
			threshold, strconv.Itoa(o.N), causeCounts(o.ByCause)})
	}
	if len(cells) == 0 {
		return nil
	}
	if _, err := io.WriteString(w, "\nITL outliers (token chunks above the round's ITL p99) and the engine steps they fell in "+
		"(timeline.json draws each):\n\n"); err != nil {
		return err
	}
	return renderMarkdown(w, []string{"scale", "backend", "ITL p99 (ms)", "outliers", "attributed to"},
		[]tw.Align{tw.AlignRight, tw.AlignLeft, tw.AlignRight, tw.AlignRight, tw.AlignLeft}, cells)
}

// causeCounts is "prefill_in_step 12, decode_step 2": most frequent first.
func causeCounts(byCause map[string]int) string {
	causes := make([]string, 0, len(byCause))
	for c, n := range byCause {
		if n > 0 {
			causes = append(causes, c)
		}
	}
	sort.Slice(causes, func(a, b int) bool {
		if byCause[causes[a]] != byCause[causes[b]] {
			return byCause[causes[a]] > byCause[causes[b]]
		}
		return causes[a] < causes[b]
	})
	if len(causes) == 0 {
		return "-"
	}
	parts := make([]string, len(causes))
	for i, c := range causes {
		parts[i] = fmt.Sprintf("%s %d", c, byCause[c])
	}
	return strings.Join(parts, ", ")
}
