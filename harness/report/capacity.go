package report

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter/tw"

	"github.com/roseinfer/roseinfer/results"
)

// CapacitySummaryFile is bench capacity's Markdown summary.
const CapacitySummaryFile = "capacity_summary.md"

// WriteCapacitySummary writes capacity_summary.md: what was asked, one row
// per backend with its answer and bracket, then every probe of each backend
// in the order run. It formats capacity.json and computes nothing.
func WriteCapacitySummary(w io.Writer, c *results.Capacity) error {
	var b strings.Builder
	b.WriteString("# Capacity under an SLO\n\n")
	fmt.Fprintf(&b, "- SLO: %s; capacity = the highest offered load at which at least %s of requests meet every objective\n",
		sloText(c.SLO), percent(c.GoodputTarget))
	fmt.Fprintf(&b, "- search: bracket, then bisect until the bracket is within %s; a probe whose client fell behind its schedule fails\n",
		percent(c.Tolerance))
	writeMetaBullets(&b, c.Meta, []string{"mode", "model", "device", "n", "repeat", "trace_path"})
	b.WriteString("\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	header := []string{"backend", "capacity (req/s)", "scale", "bracket (req/s)", "probes", "result"}
	align := []tw.Align{tw.AlignLeft, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignLeft}
	var rows [][]string
	for _, bk := range c.Backends {
		rows = append(rows, []string{results.BackendDisplayName(bk.Backend), optionalFmt(bk.CapacityReqS, "%.4g"),
			optionalFmt(bk.CapacityScale, "%.4g"), optionalFmt(bk.Bracket.LoReqS, "%.4g") + " – " + optionalFmt(bk.Bracket.HiReqS, "%.4g"),
			fmt.Sprint(len(bk.Probes)), CapacityVerdict(&bk)})
	}
	if len(rows) == 0 {
		_, err := io.WriteString(w, "No backend ran.\n")
		return err
	}
	if err := renderMarkdown(w, header, align, rows); err != nil {
		return err
	}
	for _, bk := range c.Backends {
		if len(bk.Probes) == 0 {
			continue
		}
		if _, err := fmt.Fprintf(w, "\n## %s: probes\n\n", results.BackendDisplayName(bk.Backend)); err != nil {
			return err
		}
		header := []string{"#", "phase", "rate (req/s)", "scale", "met SLO", "ok/total", "req/s", "TTFT p90 (ms)",
			"TPOT p90 (ms)", "send lag p99 (ms)", "verdict"}
		align := []tw.Align{tw.AlignRight, tw.AlignLeft, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight,
			tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignLeft}
		var rows [][]string
		for i, p := range bk.Probes {
			verdict := "pass"
			switch {
			case !p.Valid:
				verdict = "FAIL (invalid: " + firstLine(p.InvalidReason) + ")"
			case !p.Pass:
				verdict = "fail"
			}
			rows = append(rows, []string{fmt.Sprint(i + 1), p.Phase, fmt.Sprintf("%.4g", p.RateReqS), fmt.Sprintf("%.4g", p.Scale),
				fmt.Sprintf("%.1f%%", p.SLOAttainment*100), fmt.Sprintf("%d/%d", p.NumSuccess, p.NumRequests),
				fmt.Sprintf("%.2f", p.ReqPerS), optional(p.TTFTP90Ms), optional(p.TPOTP90Ms), optional(p.SendLagP99Ms), verdict})
		}
		if err := renderMarkdown(w, header, align, rows); err != nil {
			return err
		}
	}
	return nil
}

// CapacityVerdict says in a few words how one backend's search ended.
func CapacityVerdict(bk *results.CapacityBackend) string {
	var s string
	switch {
	case bk.Error != "":
		s = "error: " + firstLine(bk.Error)
	case bk.Converged:
		s = "converged"
	case bk.Stop == "max_load":
		s = "every rate up to --max-rate passed: capacity is at least this"
	case bk.Stop == "min_load":
		s = "no rate passed"
	case bk.Stop == "max_probes":
		s = "not converged: out of probes (--max-probes)"
	default:
		s = "not converged: " + bk.Stop
	}
	if bk.LimitedByClient {
		s += "; the upper bound is the client falling behind, not the SLO"
	}
	return s
}

// capacityHTML is the capacity section of report.html: the summary
// Markdown rendered, then the figure.
func capacityHTML(b *bytes.Buffer, c *results.Capacity, figs []ReportFigure, files []string) error {
	var md bytes.Buffer
	if err := WriteCapacitySummary(&md, c); err != nil {
		return fmt.Errorf("report: capacity summary: %w", err)
	}
	b.WriteString("<section id=\"capacity\">\n<h2>Capacity</h2>\n")
	b.WriteString(markdownToHTML(md.String(), 2))
	writeFigures(b, figs, "capacity_")
	writeFigureFiles(b, files, "capacity_")
	b.WriteString("</section>\n")
	return nil
}

// sloText writes thresholds in --slo syntax, metrics in name order.
func sloText(slo map[string]float64) string {
	names := make([]string, 0, len(slo))
	for name := range slo {
		names = append(names, name)
	}
	slices.Sort(names)
	for i, name := range names {
		names[i] = name + "≤" + strconv.FormatFloat(slo[name], 'g', -1, 64) + "ms"
	}
	return strings.Join(names, ", ")
}
