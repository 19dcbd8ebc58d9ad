package plots

import (
	"errors"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// HistoryPanel is one panel of the history figure: one figure of merit
// across runs, one line per series.
type HistoryPanel struct {
	Title, YLabel string
	Series        []HistorySeries
}

// HistorySeries is one line: a value per run, nil where that run has none
// (the line breaks there).
type HistorySeries struct {
	Name   string
	Values []*float64
}

// ErrNoHistory is returned when there is no run to draw.
var ErrNoHistory = errors.New("no runs in the history")

// History is the history figure (name "history"): the panels two to a row,
// x the runs in order labelled by labels (dates, revisions), one color and
// marker per series name, shared across panels. It charts absolute figures
// measured on whatever machine ran each night: a trend to read, not a gate
// (bench ab is the gate).
func History(labels []string, panels []HistoryPanel) (*Figure, error) {
	if len(labels) == 0 || len(panels) == 0 {
		return nil, ErrNoHistory
	}
	sz := compactSizes
	var names []string
	for _, p := range panels {
		for _, s := range p.Series {
			if !slices.Contains(names, s.Name) {
				names = append(names, s.Name)
			}
		}
	}
	styles := map[string]seriesStyle{}
	var entries []legendEntry
	for i, name := range names {
		styles[name] = seriesStyle{hex(spareColors[i%len(spareColors)]), spareMarkers[i%len(spareMarkers)]}
		entries = append(entries, legendEntry{Text: name, Thumb: lineMarkerThumb(styles[name].Color, styles[name].Marker, sz)})
	}
	const cols = 2
	rows := (len(panels) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for r := range grid {
		grid[r] = make([]*plot.Plot, cols)
		for c := range grid[r] {
			i := r*cols + c
			if i >= len(panels) {
				grid[r][c] = newPlot(sz) // an empty tile keeps the grid aligned
				grid[r][c].HideAxes()
				continue
			}
			grid[r][c] = historyPlot(panels[i], labels, styles, sz)
		}
	}
	leg := legend{Entries: entries, Cols: min(len(entries), 4), Style: textStyle(sz.Legend)}
	legW, legH := leg.Size()
	fig := &Figure{Name: "history", Width: 11 * vg.Inch, Height: vg.Length(rows)*3*vg.Inch + legH + 20, DPI: 110}
	fig.draw = func(dc draw.Canvas) {
		const margin = vg.Length(10)
		leg.Draw(dc, vg.Point{X: (dc.Min.X+dc.Max.X)/2 - legW/2, Y: dc.Max.Y - margin})
		area := draw.Crop(dc, margin, -margin, margin, -(legH + 2*margin))
		canvases := plot.Align(grid, draw.Tiles{Rows: rows, Cols: cols, PadX: 28, PadY: 22}, area)
		for r := range grid {
			for c := range grid[r] {
				grid[r][c].Draw(canvases[r][c])
			}
		}
	}
	return fig, nil
}

// historyPlot is one panel.
func historyPlot(hp HistoryPanel, labels []string, styles map[string]seriesStyle, sz sizes) *plot.Plot {
	p := newPlot(sz)
	p.Title.Text, p.Y.Label.Text = hp.Title, hp.YLabel
	p.X.Min, p.X.Max = -0.5, float64(len(labels))-0.5
	p.X.Tick.Marker = runTicks(labels)
	top := 0.0
	for _, s := range hp.Series {
		for _, v := range s.Values {
			if v != nil && !math.IsNaN(*v) && !math.IsInf(*v, 0) {
				top = math.Max(top, *v)
			}
		}
	}
	p.Y.Min, p.Y.Max = 0, niceMax(top)
	p.Add(historyLines{series: hp.Series, styles: styles, sz: sz})
	return p
}

// historyLines draws each series as a line through its values with a marker
// at each, broken where a run has no value.
type historyLines struct {
	series []HistorySeries
	styles map[string]seriesStyle
	sz     sizes
}

func (h historyLines) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for _, s := range h.series {
		st := h.styles[s.Name]
		var line []vg.Point
		flush := func() {
			if len(line) > 1 {
				c.StrokeLines(draw.LineStyle{Color: st.Color, Width: h.sz.Line}, c.ClipLinesXY(line)...)
			}
			line = line[:0]
		}
		for i, v := range s.Values {
			if v == nil || math.IsNaN(*v) || math.IsInf(*v, 0) {
				flush()
				continue
			}
			pt := vg.Point{X: trX(float64(i)), Y: trY(*v)}
			line = append(line, pt)
			c.DrawGlyph(draw.GlyphStyle{Color: st.Color, Radius: h.sz.MarkerRadius, Shape: markerGlyph{Shape: st.Marker}}, pt)
		}
		flush()
	}
}

// runTicks labels the runs, thinned to about a dozen labels.
type runTicks []string

func (t runTicks) Ticks(_, _ float64) []plot.Tick {
	every := max(1, (len(t)+11)/12)
	ticks := make([]plot.Tick, len(t))
	for i, label := range t {
		ticks[i] = plot.Tick{Value: float64(i)}
		if i%every == 0 || i == len(t)-1 {
			ticks[i].Label = label
		}
	}
	return ticks
}
