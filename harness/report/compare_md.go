package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/roseinfer/roseinfer/results"
)

// WriteMarkdown writes the comparison for a person (or a CI summary page):
// the verdict first, then the regressions, warnings and every row.
func (c *Comparison) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# Benchmark comparison\n\n")
	fmt.Fprintf(&b, "- baseline: `%s`%s\n", c.Baseline, parenthesized(c.BaselineRun))
	fmt.Fprintf(&b, "- current: `%s`%s\n", c.Current, parenthesized(c.CurrentRun))
	if len(c.Rules) == 0 {
		b.WriteString("- fail on: (no rules: deltas for information only)\n")
	} else {
		defaults := ""
		if c.DefaultRule {
			defaults = " (the defaults; --fail-on names others)"
		}
		fmt.Fprintf(&b, "- fail on: `%s`%s\n", strings.Join(c.Rules, "`, `"), defaults)
	}
	b.WriteString("- a change beyond a rule is a regression unless both runs have repeat rounds and their 95% confidence intervals overlap\n")
	switch {
	case c.Regressions > 0:
		fmt.Fprintf(&b, "- result: **REGRESSION** (%d of %d checks)\n", c.Regressions, c.Checks)
	case len(c.Unevaluated) > 0:
		fmt.Fprintf(&b, "- result: **CANNOT EVALUATE** %d rule check(s) (%d checks, no regression)\n", len(c.Unevaluated), c.Checks)
	default:
		fmt.Fprintf(&b, "- result: **no regression** (%d checks)\n", c.Checks)
	}

	var regressions []CompareRow
	for _, r := range c.Rows {
		if r.Status == StatusRegression || (r.Status == StatusMissing && r.Rule != "") {
			regressions = append(regressions, r)
		}
	}
	if len(regressions) > 0 {
		b.WriteString("\n## Regressions\n\n")
		writeCompareTable(&b, regressions)
	}
	WriteListSection(&b, "Rules not evaluated", c.Unevaluated)
	WriteListSection(&b, "Warnings", c.Warnings)
	b.WriteString("\n## All metrics\n\n")
	writeCompareTable(&b, c.Rows)
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes the comparison as indented JSON (null where a value is
// missing, never NaN).
func (c *Comparison) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(c)
}

func writeCompareTable(b *strings.Builder, rows []CompareRow) {
	b.WriteString("| kind | backend | scale | metric | baseline | current | delta | 95% CI baseline → current | rule | status | note |\n")
	b.WriteString("|---|---|---:|---|---:|---:|---:|---|---|---|---|\n")
	for _, r := range rows {
		scale := ""
		if r.Scale != nil {
			scale = strconv.FormatFloat(*r.Scale, 'f', 2, 64)
		}
		ci := ""
		if r.BaselineCI != nil || r.CurrentCI != nil {
			ci = formatCI(r.BaselineCI) + " → " + formatCI(r.CurrentCI)
		}
		status := r.Status
		if status == StatusRegression || (status == StatusMissing && r.Rule != "") {
			status = "**" + status + "**"
		}
		cells := []string{r.Kind, results.BackendDisplayName(r.Backend), scale, r.Metric, formatCompareValue(r.Baseline),
			formatCompareValue(r.Current), formatDelta(r.DeltaPct), ci, r.Rule, status, r.Note}
		for i, cell := range cells {
			cells[i] = strings.ReplaceAll(strings.ReplaceAll(cell, "|", `\|`), "\n", " ")
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
}

func parenthesized(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

func formatCompareValue(v *float64) string {
	if v == nil {
		return "—"
	}
	return strconv.FormatFloat(*v, 'f', 2, 64)
}

func formatDelta(v *float64) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprintf("%+.1f%%", *v)
}

func formatCI(ci *[2]float64) string {
	if ci == nil {
		return "—"
	}
	return fmt.Sprintf("[%.2f, %.2f]", ci[0], ci[1])
}

// WriteListSection writes a "## heading" section listing items as bullets,
// or nothing when there are none (the compare and A/B reports' notes).
func WriteListSection(b *strings.Builder, heading string, items []string) {
	if len(items) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## %s\n\n", heading)
	for _, it := range items {
		fmt.Fprintf(b, "- %s\n", it)
	}
}
