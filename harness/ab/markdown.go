package ab

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/roseinfer/roseinfer/harness/report"
)

// Files an A/B run writes beside online_results.json.
const (
	JSONFile     = "ab.json"
	MarkdownFile = "ab.md"
)

// WriteJSON writes the result as indented JSON (null where a value is
// missing, never NaN).
func (res *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(res)
}

// WriteMarkdown writes the result for a person or a CI summary page: the
// verdict first, then what could not be judged, the warnings, and every
// scale's table.
func (res *Result) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# A/B on one machine: B / A\n\n")
	fmt.Fprintf(&b, "- A: `%s`\n- B: `%s`\n", res.A, res.B)
	if res.Order != "" {
		fmt.Fprintf(&b, "- rounds per scale: %s (%d per side)\n", res.Order, res.Pairs)
	}
	fmt.Fprintf(&b, "- interval: 95%%, %s; %d resamples, seed %d\n", res.Bootstrap.Method, res.Bootstrap.Iterations, res.Bootstrap.Seed)
	if len(res.Rules) == 0 {
		b.WriteString("- fail on: (no rules: ratios for information only)\n")
	} else {
		defaults := ""
		if res.DefaultRules {
			defaults = " (the defaults; --fail-on names others)"
		}
		fmt.Fprintf(&b, "- fail on: `%s`%s; a change beyond a rule is a regression when its interval excludes 1.0\n",
			strings.Join(res.Rules, "`, `"), defaults)
	}
	switch {
	case res.Regressions > 0:
		fmt.Fprintf(&b, "- result: **REGRESSION** (%d of %d checks)\n", res.Regressions, res.Checks)
	case len(res.Unevaluated) > 0:
		fmt.Fprintf(&b, "- result: **CANNOT EVALUATE** %d check(s) (%d checks, no regression)\n", len(res.Unevaluated), res.Checks)
	default:
		fmt.Fprintf(&b, "- result: **no regression** (%d checks)\n", res.Checks)
	}
	report.WriteListSection(&b, "Not evaluated", res.Unevaluated)
	report.WriteListSection(&b, "Warnings", res.Warnings)
	var scale *float64
	for _, r := range res.Rows {
		if scale == nil || *scale != r.Scale {
			scale = &r.Scale
			fmt.Fprintf(&b, "\n## Scale %s\n\n", formatScale(r.Scale))
			b.WriteString("| metric | A | B | B/A | 95% interval | rule | verdict |\n")
			b.WriteString("|---|---:|---:|---:|---|---|---|\n")
		}
		ci := "—"
		if r.CI != nil {
			ci = fmt.Sprintf("[%.3f, %.3f]", r.CI[0], r.CI[1])
			if r.Differs {
				ci += " ≠ 1"
			}
		}
		status := r.Status
		if status == report.StatusRegression {
			status = "**" + status + "**"
		}
		if r.Note != "" {
			status += ": " + r.Note
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", r.Metric, value(r.A), value(r.B), value(r.Ratio), ci, r.Rule, status)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func value(v *float64) string {
	if v == nil {
		return "—"
	}
	return strconv.FormatFloat(*v, 'f', 3, 64)
}

func formatScale(s float64) string { return strconv.FormatFloat(s, 'g', 6, 64) }
