package report

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/roseinfer/roseinfer/results"
)

// Summary Markdown file names.
const (
	OnlineSummaryFile  = "online_summary.md"
	OfflineSummaryFile = "offline_summary.md"
)

// WriteOnlineSummary writes online_summary.md in the original's layout:
// a title, bullet lines from meta, and one row per (scale, backend)
// with p50/p90/p99 of TTFT, TPOT, ITL and E2E in ms, rows sorted by scale
// then canonical label, backends by display name. Columns after the
// original's six are additions: successes, req/s, output tok/s, goodput
// (with --slo), send-lag p99, and a note marking scales that are invalid
// (the client fell behind its schedule) or had errors.
func WriteOnlineSummary(w io.Writer, on *results.Online) error {
	var b strings.Builder
	b.WriteString("# Online Serving Benchmark Summary\n\n")
	writeMetaBullets(&b, on.Meta, []string{"model", "dtype", "device", "n", "scales", "trace_path"})
	b.WriteString("\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}

	rows := append([]results.Summary(nil), on.Summaries...)
	labels := make([]string, 0, len(rows))
	for _, s := range rows {
		labels = append(labels, s.Backend)
	}
	canon := results.CanonicalLabels(labels)
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].Scale != rows[j].Scale {
			return rows[i].Scale < rows[j].Scale
		}
		return canon[rows[i].Backend] < canon[rows[j].Backend]
	})
	hasGoodput := false
	for _, s := range rows {
		hasGoodput = hasGoodput || s.GoodputReqPerS != nil
	}
	header := []string{"scale", "backend", "TTFT p50/p90/p99 (ms)", "TPOT p50/p90/p99 (ms)",
		"ITL p50/p90/p99 (ms)", "E2E p50/p90/p99 (ms)", "ok/total", "req/s", "output tok/s"}
	align := []tw.Align{tw.AlignRight, tw.AlignLeft, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight,
		tw.AlignRight, tw.AlignRight, tw.AlignRight}
	if hasGoodput {
		header = append(header, "goodput (req/s)")
		align = append(align, tw.AlignRight)
	}
	header = append(header, "send lag p99 (ms)", "note")
	align = append(align, tw.AlignRight, tw.AlignLeft)

	var cells [][]string
	for _, s := range rows {
		row := []string{
			fmt.Sprintf("%.2f", s.Scale),
			results.BackendDisplayName(s.Backend),
			triple(s.TTFTMs), triple(s.TPOTMs), triple(s.ITLMs), triple(s.E2EMs),
			fmt.Sprintf("%d/%d", s.NumSuccess, s.NumRequests),
			fmt.Sprintf("%.2f", s.ReqPerS),
			fmt.Sprintf("%.2f", s.TokPerS),
		}
		if hasGoodput {
			row = append(row, optional(s.GoodputReqPerS))
		}
		row = append(row, optional(s.SendLagMs.P99), onlineNote(s))
		cells = append(cells, row)
	}
	if len(cells) == 0 {
		if _, err := io.WriteString(w, "No completed scales.\n"); err != nil {
			return err
		}
		return writeBackendProblems(w, on)
	}
	if err := renderMarkdown(w, header, align, cells); err != nil {
		return err
	}
	if err := writePrefixCache(w, rows); err != nil {
		return err
	}
	if err := writeLowSuccess(w, on, rows); err != nil {
		return err
	}
	if err := writeITLOutliers(w, rows); err != nil {
		return err
	}
	return writeBackendProblems(w, on)
}

// writeBackendProblems lists, after the table, each backend that was skipped
// or failed, with the reason and (when known) the command that fixes it, so
// a backend missing from the table is never silent.
func writeBackendProblems(w io.Writer, on *results.Online) error {
	labels := make([]string, 0, len(on.ByBackend))
	for label, b := range on.ByBackend {
		if b != nil && (b.Error != "" || b.Skipped) {
			labels = append(labels, label)
		}
	}
	if len(labels) == 0 {
		return nil
	}
	sort.Strings(labels)
	var b strings.Builder
	b.WriteString("\nBackends without (complete) results:\n\n")
	for _, label := range labels {
		bk := on.ByBackend[label]
		what := "failed"
		if bk.Skipped {
			what = "skipped"
		}
		fmt.Fprintf(&b, "- %s: %s: %s", results.BackendDisplayName(label), what, firstLine(bk.Error))
		if bk.FixHint != "" {
			fmt.Fprintf(&b, "; fix: `%s`", bk.FixHint)
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// LowSuccess says why a scale's success rate fails the run, with its error
// kinds and counts ("success rate 10.0% (5/50) below --min-success-rate 99%:
// connect 45"), or "" when it meets min. The online runner fails the run on
// it and the summary lists it, so both say the same.
func LowSuccess(s results.Summary, min float64) string {
	if s.NumRequests == 0 || s.SuccessRate >= min {
		return ""
	}
	msg := fmt.Sprintf("success rate %s (%d/%d) below --min-success-rate %s",
		percent(s.SuccessRate), s.NumSuccess, s.NumRequests, percent(min))
	if kinds := errorKinds(s.ErrorsByKind); kinds != "" {
		msg += ": " + kinds
	}
	return msg
}

func percent(f float64) string { return strconv.FormatFloat(f*100, 'f', -1, 64) + "%" }

// writeLowSuccess lists, after the table, each scale whose success rate is
// below the run's min_success_rate (meta), so a failed run says why.
func writeLowSuccess(w io.Writer, on *results.Online, rows []results.Summary) error {
	min, ok := on.Meta["min_success_rate"].(float64)
	if !ok {
		return nil
	}
	var b strings.Builder
	for _, s := range rows {
		if why := LowSuccess(s, min); why != "" {
			fmt.Fprintf(&b, "- %s, scale %s: %s\n", results.BackendDisplayName(s.Backend),
				strconv.FormatFloat(s.Scale, 'f', -1, 64), why)
		}
	}
	if b.Len() == 0 {
		return nil
	}
	_, err := io.WriteString(w, "\n**FAILED**: scales below the minimum success rate:\n\n"+b.String())
	return err
}

// onlineNote says what a reader must know before trusting a row.
func onlineNote(s results.Summary) string {
	var notes []string
	if !s.Valid {
		reason := s.InvalidReason
		if reason == "" {
			reason = "replay did not keep its schedule"
		}
		notes = append(notes, "INVALID: "+reason)
	}
	if s.NumError > 0 {
		msg := fmt.Sprintf("%d errors", s.NumError)
		if kinds := errorKinds(s.ErrorsByKind); kinds != "" {
			msg += " (" + kinds + ")"
		}
		notes = append(notes, msg)
	}
	if s.NumRetries > 0 {
		notes = append(notes, fmt.Sprintf("%d retried on a new connection", s.NumRetries))
	}
	if len(s.Rounds) > 1 {
		notes = append(notes, fmt.Sprintf("%d rounds", len(s.Rounds)))
	}
	return strings.Join(notes, "; ")
}

// WriteOfflineSummary writes offline_summary.md in the original's layout:
// one row per backend with req/s, output tok/s, total tok/s (2
// decimals) and total latency (3 decimals), sorted by canonical label. Added
// columns: prefill and decode seconds when known, and a note with the error
// of a failed backend.
func WriteOfflineSummary(w io.Writer, off *results.Offline) error {
	var b strings.Builder
	b.WriteString("# Offline Throughput Benchmark Summary\n\n")
	writeMetaBullets(&b, off.Meta, []string{"model", "dtype", "device", "num_prompts", "input_len", "output_len"})
	b.WriteString("\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	rows := append([]results.OfflineResult(nil), off.Results...)
	labels := make([]string, 0, len(rows))
	for _, r := range rows {
		labels = append(labels, r.Backend)
	}
	canon := results.CanonicalLabels(labels)
	sort.SliceStable(rows, func(i, j int) bool { return canon[rows[i].Backend] < canon[rows[j].Backend] })
	header := []string{"backend", "req/s", "output tok/s", "total tok/s", "total latency (s)", "prefill (s)", "decode (s)", "note"}
	align := []tw.Align{tw.AlignLeft, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignLeft}
	var cells [][]string
	for _, r := range rows {
		note := ""
		if msg, ok := r.Extra["error"].(string); ok && msg != "" {
			note = "ERROR: " + firstLine(msg)
		}
		cells = append(cells, []string{
			results.BackendDisplayName(r.Backend),
			fmt.Sprintf("%.2f", r.RequestThroughputRPS),
			fmt.Sprintf("%.2f", r.OutputThroughputTPS),
			fmt.Sprintf("%.2f", r.TotalThroughputTPS),
			fmt.Sprintf("%.3f", r.TotalS),
			optionalFmt(r.PrefillS, "%.3f"),
			optionalFmt(r.DecodeS, "%.3f"),
			note,
		})
	}
	if len(cells) == 0 {
		_, err := io.WriteString(w, "No completed backends.\n")
		return err
	}
	return renderMarkdown(w, header, align, cells)
}

// writeMetaBullets writes the original's bullet lines: the listed keys that
// are present, then sampling, wall time, run times and versions.
func writeMetaBullets(b *strings.Builder, meta map[string]any, keys []string) {
	for _, k := range keys {
		if v, ok := meta[k]; ok && v != nil && fmt.Sprint(v) != "" {
			fmt.Fprintf(b, "- %s: `%s`\n", k, metaString(v))
		}
	}
	if _, ok := meta["temperature"]; ok {
		fmt.Fprintf(b, "- sampling: temperature=%s, top_p=%s, top_k=%s\n",
			metaString(meta["temperature"]), metaString(meta["top_p"]), metaString(meta["top_k"]))
	}
	for _, k := range []string{"wall_s", "run_start_time", "run_end_time"} {
		if v, ok := meta[k]; ok && v != nil {
			fmt.Fprintf(b, "- %s: %s\n", k, metaString(v))
		}
	}
	if versions, ok := meta[results.MetaVersions].(map[string]any); ok && len(versions) > 0 {
		keys := make([]string, 0, len(versions))
		for k, v := range versions {
			if s := metaString(v); s != "" && s != "<nil>" {
				keys = append(keys, k)
			}
		}
		sort.Slice(keys, func(i, j int) bool {
			// git_rev first, as the original.
			if (keys[i] == "git_rev") != (keys[j] == "git_rev") {
				return keys[i] == "git_rev"
			}
			return keys[i] < keys[j]
		})
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, k+"="+metaString(versions[k]))
		}
		if len(parts) > 0 {
			fmt.Fprintf(b, "- versions: `%s`\n", strings.Join(parts, ", "))
		}
	}
}

// metaString formats a meta value: floats without trailing zeros, lists as
// comma-separated values.
func metaString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = metaString(e)
		}
		return strings.Join(parts, ",")
	case []float64:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = strconv.FormatFloat(e, 'f', -1, 64)
		}
		return strings.Join(parts, ",")
	case []string:
		return strings.Join(x, ",")
	}
	return fmt.Sprint(v)
}

// triple is a "p50/p90/p99" cell with 2 decimals; "-" for a missing value.
func triple(s results.Stats) string {
	return optional(s.P50) + "/" + optional(s.P90) + "/" + optional(s.P99)
}

func optional(v *float64) string { return optionalFmt(v, "%.2f") }

func optionalFmt(v *float64, format string) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf(format, *v)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// renderMarkdown renders a GitHub Markdown table with tablewriter. Header
// auto-formatting is off (it would upper-case and rewrite the headers) and
// '|' in cells is escaped (tablewriter's Markdown renderer does not).
func renderMarkdown(w io.Writer, header []string, align []tw.Align, rows [][]string) error {
	t := tablewriter.NewTable(w,
		tablewriter.WithRenderer(renderer.NewMarkdown()),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAutoWrap(tw.WrapNone),
		tablewriter.WithAlignment(tw.Alignment(align)),
	)
	t.Header(escapeCells(header))
	for _, r := range rows {
		if err := t.Append(escapeCells(r)); err != nil {
			return err
		}
	}
	return t.Render()
}

func escapeCells(cells []string) []string {
	out := make([]string, len(cells))
	for i, c := range cells {
		out[i] = strings.ReplaceAll(c, "|", `\|`)
	}
	return out
}
