package report

import (
	"cmp"
	"fmt"
	"io"
	"path/filepath"

	"github.com/roseinfer/roseinfer/plots"
	"github.com/roseinfer/roseinfer/results"
)

// PlotOptions say which results files to draw and where (bench plot's
// flags, parsed).
type PlotOptions struct {
	Online, Offline string // results files; at least one
	// OnlineNoDefault writes only the percentile-only online figures: no
	// default figures, no online summary.
	OnlineNoDefault   bool
	OnlinePercentiles []string // p90, p99: one online_latency_<p>_only figure each (plots.ParsePercentiles)
	OutputDir         string   // "" = figures/ beside the first results file
	Formats           []string // png, svg; none = both
}

// Plot draws the figures of the results files and writes the summary
// Markdown beside them (not with OnlineNoDefault). It returns the paths
// written, also those written before an error.
func Plot(o PlotOptions) ([]string, error) {
	dir := o.OutputDir
	if dir == "" {
		dir = filepath.Join(filepath.Dir(cmp.Or(o.Online, o.Offline)), "figures")
	}
	var written []string
	if o.Online != "" {
		on, err := results.LoadOnline(o.Online)
		if err != nil {
			return written, err
		}
		figs, err := plots.OnlineFigures(on, o.OnlineNoDefault, o.OnlinePercentiles)
		if err != nil {
			return written, fmt.Errorf("plot %s: %w", o.Online, err)
		}
		paths, err := plots.WriteFiles(dir, figs, o.Formats...)
		written = append(written, paths...)
		if err != nil {
			return written, err
		}
		if !o.OnlineNoDefault {
			p := filepath.Join(dir, OnlineSummaryFile)
			if err := results.WriteAtomic(p, func(w io.Writer) error { return WriteOnlineSummary(w, on) }); err != nil {
				return written, err
			}
			written = append(written, p)
		}
	}
	if o.Offline != "" {
		off, err := results.LoadOffline(o.Offline)
		if err != nil {
			return written, err
		}
		fig, err := plots.OfflineThroughputCompare(off)
		if err != nil {
			return written, fmt.Errorf("plot %s: %w", o.Offline, err)
		}
		paths, err := plots.WriteFiles(dir, []*plots.Figure{fig}, o.Formats...)
		written = append(written, paths...)
		if err != nil {
			return written, err
		}
		p := filepath.Join(dir, OfflineSummaryFile)
		if err := results.WriteAtomic(p, func(w io.Writer) error { return WriteOfflineSummary(w, off) }); err != nil {
			return written, err
		}
		written = append(written, p)
	}
	return written, nil
}
