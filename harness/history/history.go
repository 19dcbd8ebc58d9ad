// Package history keeps the absolute figures of successive runs (the
// nightly job's) in a JSON Lines file, one run a line, and lays them out as
// the panels of plots.History. It charts a trend and judges nothing:
// absolute figures move with the machine that measured them, so the nightly
// gate is bench ab (yesterday's commit against today's on one machine), and
// this file is only its memory.
package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"

	"github.com/roseinfer/roseinfer/plots"
	"github.com/roseinfer/roseinfer/results"
)

// Entry is one run: when it started, the revision it measured, and its
// headline figures.
type Entry struct {
	Time    string   `json:"time"` // the run's start, as its meta records it
	GitRev  string   `json:"git_rev,omitempty"`
	Figures []Figure `json:"figures"`
}

// Figure is one headline figure of one series: metric "tpot_ms.p90" of
// series "roseinfer scale 0.4", or "output_throughput_tps" of "roseinfer
// (offline)".
type Figure struct {
	Metric string  `json:"metric"`
	Series string  `json:"series"`
	Value  float64 `json:"value"`
}

// Panels are the charted metrics, in order, with their titles and units.
var Panels = []struct{ Metric, Title, YLabel string }{
	{"ttft_ms.p90", "TTFT p90", "ms"},
	{"tpot_ms.p90", "TPOT p90", "ms"},
	{"itl_ms.p99", "ITL p99", "ms"},
	{"e2e_ms.p90", "E2E p90", "ms"},
	{"tok_per_s", "Online output throughput", "tok/s"},
	{"output_throughput_tps", "Offline output throughput", "tok/s"},
}

// FromRun takes a run's headline figures: every online backend × scale
// summary and every offline result (either may be nil).
func FromRun(on *results.Online, off *results.Offline) (Entry, error) {
	var e Entry
	meta := map[string]any{}
	if on != nil {
		meta = on.Meta
		for _, s := range on.Summaries {
			series := s.Backend + " scale " + strconv.FormatFloat(s.Scale, 'g', 6, 64)
			for _, f := range []struct {
				metric string
				v      *float64
			}{{"ttft_ms.p90", s.TTFTMs.P90}, {"tpot_ms.p90", s.TPOTMs.P90}, {"itl_ms.p99", s.ITLMs.P99},
				{"e2e_ms.p90", s.E2EMs.P90}, {"tok_per_s", &s.TokPerS}} {
				if f.v != nil {
					e.Figures = append(e.Figures, Figure{Metric: f.metric, Series: series, Value: *f.v})
				}
			}
		}
	}
	if off != nil {
		if on == nil {
			meta = off.Meta
		}
		for _, r := range off.Results {
			if _, failed := r.Extra["error"]; !failed {
				e.Figures = append(e.Figures, Figure{Metric: "output_throughput_tps", Series: r.Backend + " (offline)", Value: r.OutputThroughputTPS})
			}
		}
	}
	if len(e.Figures) == 0 {
		return e, errors.New("the run has no summary to record")
	}
	e.Time, _ = meta["run_start_time"].(string)
	if versions, ok := meta[results.MetaVersions].(map[string]any); ok {
		e.GitRev, _ = versions["git_rev"].(string)
	}
	return e, nil
}

// Load reads a history file; a missing file is an empty history. A line
// that is not an entry is an error naming path:line.
func Load(path string) ([]Entry, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Entry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for line := 1; sc.Scan(); line++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if len(e.Figures) == 0 {
			return nil, fmt.Errorf("%s:%d: figures: an entry has at least one", path, line)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// Save writes the last keep entries (all when keep ≤ 0) to path atomically.
func Save(path string, entries []Entry, keep int) error {
	if keep > 0 && len(entries) > keep {
		entries = entries[len(entries)-keep:]
	}
	return results.WriteAtomic(path, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		for _, e := range entries {
			if err := enc.Encode(e); err != nil {
				return err
			}
		}
		return nil
	})
}

// Chart lays the entries out as plots.History's run labels (the start
// date and revision) and panels, one per charted metric that some entry has.
func Chart(entries []Entry) (labels []string, panels []plots.HistoryPanel) {
	for _, e := range entries {
		label := e.Time
		if len(label) >= 10 {
			label = label[5:10] // MM-DD of an ISO-8601 time
		}
		if e.GitRev != "" {
			label += " " + e.GitRev[:min(7, len(e.GitRev))]
		}
		labels = append(labels, label)
	}
	for _, p := range Panels {
		var names []string
		for _, e := range entries {
			for _, f := range e.Figures {
				if f.Metric == p.Metric && !slices.Contains(names, f.Series) {
					names = append(names, f.Series)
				}
			}
		}
		if len(names) == 0 {
			continue
		}
		panel := plots.HistoryPanel{Title: p.Title, YLabel: p.YLabel}
		for _, name := range names {
			s := plots.HistorySeries{Name: name, Values: make([]*float64, len(entries))}
			for i, e := range entries {
				for _, f := range e.Figures {
					if f.Metric == p.Metric && f.Series == name {
						s.Values[i] = &f.Value
					}
				}
			}
			panel.Series = append(panel.Series, s)
		}
		panels = append(panels, panel)
	}
	return labels, panels
}
