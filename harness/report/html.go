package report

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/roseinfer/roseinfer/results"
)

// ReportFile is the report's file name inside a run directory.
const ReportFile = "report.html"

// ReportFigure is one figure embedded in the report as inline SVG.
type ReportFigure struct {
	Name    string // file stem, e.g. online_latency_compare
	Caption string
	SVG     []byte
}

// ReportInput is everything report.html shows. Any kind may be nil.
type ReportInput struct {
	RunDir   string
	Online   *results.Online
	Offline  *results.Offline
	Capacity *results.Capacity // bench capacity's capacity.json
	Figures  []ReportFigure    // in display order; online_* go with the online section, capacity_* with capacity
	// FigureFiles are the figure files written beside the page (paths
	// relative to it, e.g. figures/online_ttft_ms.png): each section links
	// its own, so every figure of the run is one click away.
	FigureFiles []string
}

// WriteReportHTML writes one self-contained HTML page (inline CSS and SVG, no
// script, no external resource) that reads offline: warnings first (invalid
// scales, failed backends, errors), then the summary tables and figures, the
// replay fidelity figures, and the run's metadata and versions. The tables
// are the summary Markdown files rendered, so the two never disagree.
func WriteReportHTML(w io.Writer, in ReportInput) error {
	if in.Online == nil && in.Offline == nil && in.Capacity == nil {
		return fmt.Errorf("report: %w", results.ErrNoResults)
	}
	var b bytes.Buffer
	title := "Benchmark report"
	if in.RunDir != "" {
		title += " — " + in.RunDir
	}
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	b.WriteString("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	fmt.Fprintf(&b, "<title>%s</title>\n<style>%s</style>\n</head>\n<body>\n", html.EscapeString(title), reportCSS)
	fmt.Fprintf(&b, "<h1>%s</h1>\n", html.EscapeString(title))
	writeContents(&b, in)
	writeWarnings(&b, in)
	if in.Capacity != nil {
		if err := capacityHTML(&b, in.Capacity, in.Figures, in.FigureFiles); err != nil {
			return err
		}
	}
	if in.Online != nil {
		b.WriteString("<section id=\"online\">\n<h2>Online serving</h2>\n")
		var md bytes.Buffer
		if err := WriteOnlineSummary(&md, in.Online); err != nil {
			return fmt.Errorf("report: online summary: %w", err)
		}
		b.WriteString(markdownToHTML(md.String(), 2))
		writeFigures(&b, in.Figures, "online_")
		writeFigureFiles(&b, in.FigureFiles, "online_")
		writeFidelity(&b, in.Online)
		b.WriteString("</section>\n")
	}
	if in.Offline != nil {
		b.WriteString("<section id=\"offline\">\n<h2>Offline throughput</h2>\n")
		var md bytes.Buffer
		if err := WriteOfflineSummary(&md, in.Offline); err != nil {
			return fmt.Errorf("report: offline summary: %w", err)
		}
		b.WriteString(markdownToHTML(md.String(), 2))
		writeFigures(&b, in.Figures, "offline_")
		writeFigureFiles(&b, in.FigureFiles, "offline_")
		b.WriteString("</section>\n")
	}
	b.WriteString("<section id=\"meta\">\n<h2>Run metadata</h2>\n")
	if in.Online != nil {
		writeBackends(&b, in.Online)
		writeMeta(&b, "Online run", in.Online.Meta)
	}
	if in.Offline != nil {
		writeMeta(&b, "Offline run", in.Offline.Meta)
	}
	b.WriteString("</section>\n</body>\n</html>\n")
	_, err := w.Write(b.Bytes())
	return err
}

func writeContents(b *bytes.Buffer, in ReportInput) {
	b.WriteString("<nav><ul>")
	if in.Capacity != nil {
		b.WriteString(`<li><a href="#capacity">Capacity</a></li>`)
	}
	if in.Online != nil {
		b.WriteString(`<li><a href="#online">Online serving</a></li><li><a href="#fidelity">Replay fidelity</a></li>`)
	}
	if in.Offline != nil {
		b.WriteString(`<li><a href="#offline">Offline throughput</a></li>`)
	}
	b.WriteString(`<li><a href="#meta">Run metadata</a></li></ul></nav>` + "\n")
}

// writeWarnings lists what makes numbers untrustworthy or missing.
func writeWarnings(b *bytes.Buffer, in ReportInput) {
	var items []string
	if on := in.Online; on != nil {
		for _, s := range on.Summaries {
			if !s.Valid {
				items = append(items, fmt.Sprintf("<strong>Invalid scale</strong>: %s at scale %s — %s. Its latencies include client lag; do not compare them.",
					esc(results.BackendDisplayName(s.Backend)), esc(formatScale(s.Scale)), esc(cmp.Or(s.InvalidReason, "the replay did not keep its schedule"))))
			}
			if s.NumError > 0 {
				items = append(items, fmt.Sprintf("%s at scale %s: %d of %d requests failed.",
					esc(results.BackendDisplayName(s.Backend)), esc(formatScale(s.Scale)), s.NumError, s.NumRequests))
			}
		}
		for _, label := range sortedBackendLabels(on) {
			bk := on.ByBackend[label]
			if bk == nil || (bk.Error == "" && !bk.Skipped) {
				continue
			}
			msg := fmt.Sprintf("<strong>Backend %s failed</strong>: %s", esc(results.BackendDisplayName(label)), esc(cmp.Or(bk.Error, "skipped")))
			if bk.FixHint != "" {
				msg += " — " + esc(bk.FixHint)
			}
			items = append(items, msg)
		}
	}
	if c := in.Capacity; c != nil {
		for i := range c.Backends {
			if bk := &c.Backends[i]; !bk.Converged {
				items = append(items, fmt.Sprintf("<strong>Capacity of %s</strong>: %s.", esc(results.BackendDisplayName(bk.Backend)), esc(CapacityVerdict(bk))))
			}
		}
	}
	if off := in.Offline; off != nil {
		for _, r := range off.Results {
			if errText, _ := r.Extra["error"].(string); errText != "" {
				items = append(items, fmt.Sprintf("<strong>Offline %s failed</strong>: %s", esc(results.BackendDisplayName(r.Backend)), esc(firstErrorLine(errText))))
			}
		}
	}
	if len(items) == 0 {
		return
	}
	b.WriteString("<div class=\"warn\" id=\"warnings\"><h2>Warnings</h2><ul>\n")
	for _, it := range items {
		b.WriteString("<li>" + it + "</li>\n")
	}
	b.WriteString("</ul></div>\n")
}

// writeFigures embeds the figures whose names start with prefix.
func writeFigures(b *bytes.Buffer, figs []ReportFigure, prefix string) {
	for _, f := range figs {
		if !strings.HasPrefix(f.Name, prefix) {
			continue
		}
		fmt.Fprintf(b, "<figure id=\"fig-%s\">\n%s\n", esc(f.Name), inlineSVG(f.SVG, cmp.Or(f.Caption, f.Name)))
		fmt.Fprintf(b, "<figcaption>%s</figcaption>\n</figure>\n", esc(cmp.Or(f.Caption, f.Name)))
	}
}

// writeFigureFiles links the figure files whose names start with prefix.
func writeFigureFiles(b *bytes.Buffer, files []string, prefix string) {
	var links []string
	for _, f := range files {
		if name := path.Base(f); strings.HasPrefix(name, prefix) {
			links = append(links, fmt.Sprintf(`<a href="%s">%s</a>`, esc(f), esc(name)))
		}
	}
	if len(links) > 0 {
		fmt.Fprintf(b, "<p class=\"files\">Figure files: %s</p>\n", strings.Join(links, " · "))
	}
}

var (
	xmlProlog  = regexp.MustCompile(`(?s)^\s*<\?xml.*?\?>\s*(<!--.*?-->\s*)?`)
	svgSizeTag = regexp.MustCompile(`<svg width="[^"]*" height="[^"]*"`)
)

// inlineSVG prepares a standalone SVG document for embedding in HTML: no
// XML prolog, and a width that follows the page (the viewBox keeps its
// aspect ratio).
func inlineSVG(svg []byte, label string) string {
	s := xmlProlog.ReplaceAllString(string(svg), "")
	return svgSizeTag.ReplaceAllString(s, `<svg class="fig" role="img" aria-label="`+esc(label)+`"`)
}

// writeFidelity shows how faithfully the client replayed the trace: send
// lag, TTFT measured from the scheduled time, errors, and the server-side
// split of TTFT when the backend reported it.
func writeFidelity(b *bytes.Buffer, on *results.Online) {
	b.WriteString("<h3 id=\"fidelity\">Replay fidelity</h3>\n")
	b.WriteString("<p>Send lag is how late each request left the client against its trace schedule; a scale whose send-lag p99 exceeds the threshold is invalid. TTFT from schedule includes that lag.</p>\n")
	b.WriteString("<div class=\"scroll\"><table>\n<thead><tr><th class=\"r\">scale</th><th>backend</th><th class=\"r\">send lag p50/p99/max (ms)</th><th class=\"r\">TTFT from schedule p50/p99 (ms)</th><th class=\"r\">ok/total</th><th>errors by kind</th><th class=\"r\">server queue p99 (ms)</th><th class=\"r\">network p99 (ms)</th><th>valid</th></tr></thead>\n<tbody>\n")
	rows := slices.Clone(on.Summaries)
	slices.SortStableFunc(rows, func(a, c results.Summary) int {
		return cmp.Or(cmp.Compare(a.Scale, c.Scale), cmp.Compare(a.Backend, c.Backend))
	})
	for _, s := range rows {
		class := ""
		valid := "yes"
		if !s.Valid {
			class, valid = ` class="invalid"`, "no: "+cmp.Or(s.InvalidReason, "send lag")
		}
		fmt.Fprintf(b, "<tr%s><td class=\"r\">%.2f</td><td>%s</td><td class=\"r\">%s</td><td class=\"r\">%s</td><td class=\"r\">%d/%d</td><td>%s</td><td class=\"r\">%s</td><td class=\"r\">%s</td><td>%s</td></tr>\n",
			class, s.Scale, esc(results.BackendDisplayName(s.Backend)),
			joinMs(s.SendLagMs.P50, s.SendLagMs.P99, s.SendLagMs.Max), joinMs(s.TTFTScheduledMs.P50, s.TTFTScheduledMs.P99),
			s.NumSuccess, s.NumRequests, esc(errorKinds(s.ErrorsByKind)),
			statP99(s.ServerQueueMs), statP99(s.NetworkMs), esc(valid))
	}
	b.WriteString("</tbody>\n</table></div>\n")
}

// writeBackends lists each backend's command, URL and timing.
func writeBackends(b *bytes.Buffer, on *results.Online) {
	labels := sortedBackendLabels(on)
	if len(labels) == 0 {
		return
	}
	b.WriteString("<h3>Backends</h3>\n<div class=\"scroll\"><table>\n<thead><tr><th>backend</th><th>base URL</th><th>command</th><th class=\"r\">ready (s)</th><th class=\"r\">warmup (s)</th><th class=\"r\">wall (s)</th><th>status</th></tr></thead>\n<tbody>\n")
	for _, label := range labels {
		bk := on.ByBackend[label]
		if bk == nil {
			continue
		}
		status := "ok"
		if bk.Error != "" || bk.Skipped {
			status = cmp.Or(bk.Error, "skipped")
		}
		fmt.Fprintf(b, "<tr><td>%s</td><td><code>%s</code></td><td><code>%s</code></td><td class=\"r\">%.1f</td><td class=\"r\">%.1f</td><td class=\"r\">%.1f</td><td>%s</td></tr>\n",
			esc(results.BackendDisplayName(label)), esc(bk.BaseURL), esc(strings.Join(bk.Cmd, " ")),
			bk.Timing.ServerReadyS, bk.Timing.WarmupS, bk.Timing.BackendWallS, esc(status))
	}
	b.WriteString("</tbody>\n</table></div>\n")
}

// writeMeta prints every meta key (sorted), with versions in their own table.
func writeMeta(b *bytes.Buffer, title string, meta map[string]any) {
	fmt.Fprintf(b, "<h3>%s</h3>\n", esc(title))
	if versions, ok := meta[results.MetaVersions].(map[string]any); ok && len(versions) > 0 {
		b.WriteString("<h4>Versions</h4>\n")
		writeKeyValues(b, versions)
	}
	rest := map[string]any{}
	for k, v := range meta {
		if k != results.MetaVersions {
			rest[k] = v
		}
	}
	b.WriteString("<h4>Settings</h4>\n")
	writeKeyValues(b, rest)
}

func writeKeyValues(b *bytes.Buffer, m map[string]any) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b.WriteString("<div class=\"scroll\"><table class=\"kv\"><tbody>\n")
	for _, k := range keys {
		fmt.Fprintf(b, "<tr><th>%s</th><td><code>%s</code></td></tr>\n", esc(k), esc(metaValue(m[k])))
	}
	b.WriteString("</tbody></table></div>\n")
}

// metaValue prints a meta value: strings as they are, the rest as JSON.
func metaValue(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(data)
}

func sortedBackendLabels(on *results.Online) []string {
	labels := make([]string, 0, len(on.ByBackend))
	for l := range on.ByBackend {
		labels = append(labels, l)
	}
	slices.Sort(labels)
	return labels
}

func joinMs(vals ...*float64) string {
	parts := make([]string, len(vals))
	for i, v := range vals {
		parts[i] = formatCompareValue(finitePtr(v))
	}
	return strings.Join(parts, "/")
}

func statP99(s *results.Stats) string {
	if s == nil {
		return "—"
	}
	return formatCompareValue(finitePtr(s.P99))
}

func errorKinds(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func esc(s string) string { return html.EscapeString(s) }

// reportCSS keeps the page readable on screen and in print, with no fonts or
// files from elsewhere.
const reportCSS = `
body{font-family:Georgia,"Times New Roman",Times,serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#1a1a1a;line-height:1.45}
h1{font-size:1.6em;border-bottom:2px solid #333;padding-bottom:.2em}
h2{font-size:1.3em;margin-top:1.8em;border-bottom:1px solid #bbb}
h3{font-size:1.1em;margin-top:1.4em}
h4{font-size:1em;margin:1em 0 .3em}
nav ul{list-style:none;padding:0;display:flex;gap:1.2em;flex-wrap:wrap}
a{color:#1f4e8c}
code{font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:.88em;background:#f3f3f3;padding:0 .2em;word-break:break-all}
.scroll{overflow-x:auto;margin:.6em 0}
table{border-collapse:collapse;font-size:.88em}
th,td{border:1px solid #ccc;padding:.25em .5em;vertical-align:top;text-align:left}
thead th{background:#eef1f5}
.r{text-align:right;font-variant-numeric:tabular-nums}
.c{text-align:center}
tr.invalid td{background:#fdecea}
table.kv th{background:#f7f7f7;font-weight:normal;white-space:nowrap}
.warn{border:2px solid #b00020;background:#fff4f4;padding:.2em 1em;margin:1em 0}
.warn h2{border:none;color:#b00020;margin-top:.4em}
ul.meta{padding-left:1.2em}
figure{margin:1.2em 0;text-align:center}
svg.fig{width:100%;height:auto;max-width:1100px}
figcaption{font-size:.9em;color:#555}
p.files{font-size:.85em}
`
