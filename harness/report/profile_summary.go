package report

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/olekukonko/tablewriter/tw"

	"github.com/roseinfer/roseinfer/results"
)

// ProfileSummaryFile is the Markdown view of a profile manifest.
const ProfileSummaryFile = "profile_summary.md"

// WriteProfileSummary writes the manifest as Markdown: one table of runs
// (status, wall time, files), then per run the phase totals of its trace and
// the top functions of each pprof profile. Paths are shown relative to
// baseDir when they are inside it.
func WriteProfileSummary(w io.Writer, m *results.ProfileManifest, baseDir string) error {
	fmt.Fprintln(w, "# Profile Summary")
	fmt.Fprintln(w)
	for _, k := range []string{"profile", "tools", "backends", "profile_start_time", "profile_wall_s"} {
		if v, ok := m.Meta[k]; ok && v != nil {
			fmt.Fprintf(w, "- %s: `%v`\n", k, v)
		}
	}
	fmt.Fprintln(w)
	rows := make([][]string, 0, len(m.Runs))
	for _, r := range m.Runs {
		status := "ok"
		if r.ProfileError != nil {
			status = "ERROR: " + firstLine(*r.ProfileError)
		}
		var files []string
		for _, f := range r.Files {
			files = append(files, relPath(baseDir, f.Path))
		}
		rows = append(rows, []string{r.Tool, r.Backend, status, fmt.Sprintf("%.1f", r.WallS),
			fmt.Sprintf("%d/%d", r.NumSuccess, r.NumRequests), strings.Join(files, "<br>")})
	}
	err := renderMarkdown(w, []string{"tool", "backend", "status", "wall (s)", "requests ok", "files"},
		[]tw.Align{tw.AlignLeft, tw.AlignLeft, tw.AlignLeft, tw.AlignRight, tw.AlignRight, tw.AlignLeft}, rows)
	if err != nil {
		return err
	}
	for _, r := range m.Runs {
		if r.Trace == nil && len(r.Pprof) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n## %s / %s\n", r.Tool, r.Backend)
		if r.Trace != nil {
			if err := writeTraceTable(w, r.Trace, baseDir); err != nil {
				return err
			}
		}
		for i := range r.Pprof {
			if err := writePprofTable(w, &r.Pprof[i], baseDir); err != nil {
				return err
			}
		}
	}
	return nil
}

func writeTraceTable(w io.Writer, t *results.TraceSummary, baseDir string) error {
	fmt.Fprintf(w, "\nPhases in `%s` (%d events over %.2f s):\n\n", relPath(baseDir, t.Path), t.NumEvents, t.SpanS)
	rows := make([][]string, 0, len(t.Phases))
	for _, p := range t.Phases {
		rows = append(rows, []string{p.Track, p.Name, fmt.Sprint(p.Count), fmt.Sprintf("%.2f", p.TotalMs),
			fmt.Sprintf("%.3f", p.MeanMs), fmt.Sprintf("%.3f", p.MaxMs)})
	}
	return renderMarkdown(w, []string{"track", "phase", "count", "total (ms)", "mean (ms)", "max (ms)"},
		[]tw.Align{tw.AlignLeft, tw.AlignLeft, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight}, rows)
}

func writePprofTable(w io.Writer, p *results.PprofSummary, baseDir string) error {
	if p.Error != "" {
		fmt.Fprintf(w, "\n`%s`: %s\n", relPath(baseDir, p.Path), p.Error)
		return nil
	}
	fmt.Fprintf(w, "\nTop functions of `%s` (%s, total %s, %d samples):\n\n", relPath(baseDir, p.Path), p.SampleType,
		formatPprofValue(p, p.Total), p.NumSamples)
	rows := make([][]string, 0, len(p.Top))
	for _, f := range p.Top {
		rows = append(rows, []string{formatPprofValue(p, f.Flat), fmt.Sprintf("%.1f%%", f.FlatPct), formatPprofValue(p, f.Cum),
			fmt.Sprintf("%.1f%%", f.CumPct), "`" + f.Function + "`"})
	}
	return renderMarkdown(w, []string{"flat", "flat%", "cum", "cum%", "function"},
		[]tw.Align{tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignLeft}, rows)
}

func relPath(base, path string) string {
	if base == "" {
		return path
	}
	rel, err := filepath.Rel(base, path)
	if err != nil || strings.HasPrefix(rel, "..") {
		return path
	}
	return rel
}
