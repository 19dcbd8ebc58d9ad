package report

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/results"
)

// TestOnlineSummaryITLOutliers: a run with --timeline lists each scale's
// outliers and causes (most frequent first) after the table; one without
// has no such section.
func TestOnlineSummaryITLOutliers(t *testing.T) {
	on := sampleOnline()
	var buf bytes.Buffer
	if err := WriteOnlineSummary(&buf, on); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "ITL outliers") {
		t.Errorf("a run without --timeline has an outlier section:\n%s", buf.String())
	}
	on.Summaries[0].ITLOutliers = &results.ITLOutliers{ThresholdMs: fp(4), N: 5,
		ByCause: map[string]int{"delivery": 1, "prefill_in_step": 4, "decode_step": 0}}
	on.Summaries[1].ITLOutliers = &results.ITLOutliers{N: 0, ByCause: map[string]int{}} // aggregate of rounds
	buf.Reset()
	if err := WriteOnlineSummary(&buf, on); err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(buf.String(), "ITL outliers (token chunks above the round's ITL p99)")
	if !ok {
		t.Fatalf("no outlier section:\n%s", buf.String())
	}
	want := [][]string{
		{"scale", "backend", "ITL p99 (ms)", "outliers", "attributed to"},
		{"1.60", "roseinfer", "per round", "0", "-"},
		{"1.60", "roseinfer (nocache)", "4.00", "5", "prefill_in_step 4, delivery 1"},
	}
	var rows [][]string
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|--") {
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
			cells = append(cells, strings.TrimSpace(c))
		}
		rows = append(rows, cells)
	}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("outlier table %q, want %q", rows, want)
	}
}
