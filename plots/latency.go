package plots

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/roseinfer/roseinfer/results"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// ErrNoOnlineData is returned when a results file has no summaries to plot.
var ErrNoOnlineData = errors.New("no online summaries to plot")

// panelMode says what a latency panel draws: the full p50–p90 band, p90 line
// and hollow p99 markers, or a single percentile's line.
type panelMode string

const (
	modeFull panelMode = ""
	modeP90  panelMode = "p90"
	modeP99  panelMode = "p99"
)

// latencyPanel draws every backend of one metric. It is one plotter (rather
// than one per backend) so it can draw in layers: all bands first, then
// lines, then p99 marks, so no backend's band hides another's line.
type latencyPanel struct {
	metric   latencyMetric
	backends []*backendSeries
	mode     panelMode
	sz       sizes
}

// value picks the percentile a line shows.
func (lp *latencyPanel) lineValue(pt latencyPoint) (*float64, *interval) {
	if lp.mode == modeP99 {
		return pt.P99, pt.CI99
	}
	return pt.P90, pt.CI90
}

// Plot implements plot.Plotter.
func (lp *latencyPanel) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	if lp.mode == modeFull {
		for _, bs := range lp.backends {
			lp.drawBand(&c, trX, trY, bs)
		}
	}
	for _, bs := range lp.backends {
		clr := bs.Style.Color
		pts := bs.points(lp.metric)
		var run []vg.Point
		flush := func() {
			if len(run) > 1 {
				c.StrokeLines(draw.LineStyle{Color: clr, Width: lp.sz.Line}, c.ClipLinesXY(run)...)
			}
			run = nil
		}
		for _, pt := range pts {
			v, ci := lp.lineValue(pt)
			if v == nil {
				flush()
				continue
			}
			run = append(run, vg.Point{X: trX(pt.Scale), Y: trY(*v)})
			if ci != nil {
				drawErrorBar(&c, clr, trX(pt.Scale), trY(ci.Low), trY(ci.High), true)
			}
		}
		flush()
		for _, pt := range pts {
			if v, _ := lp.lineValue(pt); v != nil {
				c.DrawGlyph(draw.GlyphStyle{Color: clr, Radius: lp.sz.MarkerRadius, Shape: markerGlyph{Shape: bs.Style.Marker}},
					vg.Point{X: trX(pt.Scale), Y: trY(*v)})
			}
		}
	}
	if lp.mode == modeFull {
		for _, bs := range lp.backends {
			hollow := draw.GlyphStyle{
				Color: withAlpha(bs.Style.Color, hollowAlpha), Radius: lp.sz.MarkerRadius * 1.15,
				Shape: markerGlyph{Shape: bs.Style.Marker, Hollow: true, LineWidth: lp.sz.HollowLine},
			}
			for _, pt := range bs.points(lp.metric) {
				if pt.P99 == nil {
					continue
				}
				if pt.CI99 != nil {
					drawErrorBar(&c, hollow.Color, trX(pt.Scale), trY(pt.CI99.Low), trY(pt.CI99.High), true)
				}
				c.DrawGlyph(hollow, vg.Point{X: trX(pt.Scale), Y: trY(*pt.P99)})
			}
		}
	}
	for _, bs := range lp.backends {
		for _, pt := range bs.points(lp.metric) {
			v, _ := lp.lineValue(pt)
			if pt.Valid || v == nil {
				continue
			}
			c.DrawGlyph(draw.GlyphStyle{Color: invalidColor, Radius: lp.sz.MarkerRadius * 2.2, Shape: crossGlyph{LineWidth: 1.8}},
				vg.Point{X: trX(pt.Scale), Y: trY(*v)})
		}
	}
}

// drawBand fills p50..p90 between consecutive scales that have both; a scale
// with no neighbour gets a short bar so a single-scale run still shows p50.
func (lp *latencyPanel) drawBand(c *draw.Canvas, trX, trY func(float64) vg.Length, bs *backendSeries) {
	fill := withAlpha(bs.Style.Color, bandAlpha)
	var run []latencyPoint
	flush := func() {
		switch {
		case len(run) == 1:
			x, lo, hi := trX(run[0].Scale), trY(*run[0].P50), trY(*run[0].P90)
			const half = vg.Length(6)
			c.FillPolygon(fill, c.ClipPolygonXY([]vg.Point{{X: x - half, Y: lo}, {X: x + half, Y: lo}, {X: x + half, Y: hi}, {X: x - half, Y: hi}}))
			c.StrokeLine2(draw.LineStyle{Color: withAlpha(bs.Style.Color, bandEdgeAlpha), Width: 0.9}, x-half, lo, x+half, lo)
		case len(run) > 1:
			poly := make([]vg.Point, 0, 2*len(run))
			for _, pt := range run {
				poly = append(poly, vg.Point{X: trX(pt.Scale), Y: trY(*pt.P50)})
			}
			for i := len(run) - 1; i >= 0; i-- {
				poly = append(poly, vg.Point{X: trX(run[i].Scale), Y: trY(*run[i].P90)})
			}
			c.FillPolygon(fill, c.ClipPolygonXY(poly))
			// A thin p50 edge: where bands of several backends overlap, the
			// fill alone does not say whose p50 is where.
			c.StrokeLines(draw.LineStyle{Color: withAlpha(bs.Style.Color, bandEdgeAlpha), Width: 0.9},
				c.ClipLinesXY(poly[:len(run)])...)
		}
		run = nil
	}
	for _, pt := range bs.points(lp.metric) {
		if pt.P50 == nil || pt.P90 == nil {
			flush()
			continue
		}
		run = append(run, pt)
	}
	flush()
}

// yMax is the largest value the panel draws.
func (lp *latencyPanel) yMax() float64 {
	m := 0.0
	for _, bs := range lp.backends {
		for _, pt := range bs.points(lp.metric) {
			vals := []*float64{pt.P90}
			cis := []*interval{pt.CI90}
			switch lp.mode {
			case modeFull:
				vals = append(vals, pt.P50, pt.P99)
				cis = append(cis, pt.CI99)
			case modeP99:
				vals, cis = []*float64{pt.P99}, []*interval{pt.CI99}
			}
			for _, v := range vals {
				if v != nil {
					m = math.Max(m, *v)
				}
			}
			for _, ci := range cis {
				if ci != nil {
					m = math.Max(m, ci.High)
				}
			}
		}
	}
	return m
}

// hasData reports whether any backend has a value to draw in this panel.
func (lp *latencyPanel) hasData() bool {
	for _, bs := range lp.backends {
		for _, pt := range bs.points(lp.metric) {
			if v, _ := lp.lineValue(pt); v != nil || (lp.mode == modeFull && pt.P99 != nil) {
				return true
			}
		}
	}
	return false
}

// noDataNote writes "no data" in the middle of an empty panel.
type noDataNote struct{ sz sizes }

func (n noDataNote) Plot(c draw.Canvas, _ *plot.Plot) {
	sty := textStyle(n.sz.Label)
	sty.XAlign, sty.YAlign = draw.XCenter, draw.YCenter
	c.FillText(sty, c.Center(), "no data")
}

// scaleTicks labels exactly the scales that were run, so each point can be
// read against its scale.
type scaleTicks []float64

func (t scaleTicks) Ticks(lo, hi float64) []plot.Tick {
	if len(t) == 0 || len(t) > 10 {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	ticks := make([]plot.Tick, len(t))
	for i, v := range t {
		ticks[i] = plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64)}
	}
	return ticks
}

// newLatencyPlot is one panel: axes, ranges, ticks, the panel plotter.
func newLatencyPlot(m latencyMetric, backends []*backendSeries, mode panelMode, sz sizes, title string, xlab bool) *plot.Plot {
	p := newPlot(sz)
	p.Title.Text = title
	p.Y.Label.Text = m.YLabel
	if xlab {
		p.X.Label.Text = xLabel
	}
	scales := scalesOf(backends)
	lo, hi := 0.0, 1.0
	if len(scales) > 0 {
		lo, hi = scales[0], scales[len(scales)-1]
	}
	pad := (hi - lo) * 0.07
	if pad == 0 {
		pad = math.Max(math.Abs(lo)*0.25, 0.1)
	}
	p.X.Min, p.X.Max = lo-pad, hi+pad
	p.X.Tick.Marker = scaleTicks(scales)
	panel := &latencyPanel{metric: m, backends: backends, mode: mode, sz: sz}
	p.Y.Min, p.Y.Max = 0, niceMax(panel.yMax())
	if panel.hasData() {
		p.Add(panel)
	} else {
		p.Add(noDataNote{sz})
	}
	return p
}

// legendEntries lists the backends, then the semantic entries for what the
// marks mean (full mode), the CI bars and the invalid-scale cross when used.
func legendEntries(backends []*backendSeries, mode panelMode, sz sizes) []legendEntry {
	var out []legendEntry
	anyCI, anyInvalid := false, false
	for _, bs := range backends {
		name := bs.Name
		if bs.Failed {
			name += " (failed)"
		}
		out = append(out, legendEntry{Text: name, Thumb: lineMarkerThumb(bs.Style.Color, bs.Style.Marker, sz)})
		for _, s := range bs.Summary {
			anyInvalid = anyInvalid || !s.Valid
			for _, m := range latencyMetrics {
				if spreadInterval(s.Spread, m.Key+".p90") != nil || spreadInterval(s.Spread, m.Key+".p99") != nil {
					anyCI = true
				}
			}
		}
	}
	black := hex("#000000")
	if mode == modeFull {
		out = append(out,
			legendEntry{Text: "p90 (line)", Thumb: lineMarkerThumb(black, "o", sz)},
			legendEntry{Text: "p99 (hollow)", Thumb: hollowThumb(black, "o", sz)},
			legendEntry{Text: "p50–p90 (band)", Thumb: bandThumb(black)},
		)
	}
	if anyCI {
		out = append(out, legendEntry{Text: "95% CI over rounds", Thumb: errorBarThumb(black)})
	}
	if anyInvalid {
		out = append(out, legendEntry{Text: "invalid scale (send lag)", Thumb: crossThumb()})
	}
	return out
}

// OnlineLatencyCompare is online_latency_compare: TTFT, TPOT, ITL and E2E
// against trace scale in a 2×2 grid (11×7 in, 150 dpi), one legend to the
// right.
func OnlineLatencyCompare(on *results.Online) (*Figure, error) {
	return grid2x2(on, modeFull, paperSizes, "online_latency_compare", 150)
}

// OnlinePercentileOnly is online_latency_<p>_only: the 2×2 grid with only
// the p90 or p99 line (compact style, 250 dpi). p is "p90", "90", "p99" or "99".
func OnlinePercentileOnly(on *results.Online, p string) (*Figure, error) {
	mode, err := parsePercentile(p)
	if err != nil {
		return nil, err
	}
	return grid2x2(on, mode, compactSizes, "online_latency_"+string(mode)+"_only", 250)
}

// ParsePercentiles parses --online-percentiles ("p90,p99", "90", "").
func ParsePercentiles(list string) ([]string, error) {
	var out []string
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		mode, err := parsePercentile(item)
		if err != nil {
			return nil, err
		}
		out = append(out, string(mode))
	}
	return out, nil
}

func parsePercentile(p string) (panelMode, error) {
	switch strings.ToLower(strings.TrimSpace(p)) {
	case "p90", "90":
		return modeP90, nil
	case "p99", "99":
		return modeP99, nil
	}
	return "", fmt.Errorf("percentile must be p90 or p99, got %q", p)
}

func grid2x2(on *results.Online, mode panelMode, sz sizes, name string, dpi int) (*Figure, error) {
	backends := onlineBackends(on)
	if len(backends) == 0 {
		return nil, ErrNoOnlineData
	}
	plots := [][]*plot.Plot{make([]*plot.Plot, 2), make([]*plot.Plot, 2)}
	for i, m := range latencyMetrics {
		title := m.Title
		if mode != modeFull {
			title = fmt.Sprintf("%s (%s)", m.Title, strings.ToUpper(string(mode)))
		}
		plots[i/2][i%2] = newLatencyPlot(m, backends, mode, sz, title, i >= 2)
	}
	leg := legend{Entries: legendEntries(backends, mode, sz), Cols: 1, Style: textStyle(sz.Legend)}
	legW, legH := leg.Size()
	fig := &Figure{Name: name, Width: 11 * vg.Inch, Height: 7 * vg.Inch, DPI: dpi}
	fig.draw = func(dc draw.Canvas) {
		const margin = vg.Length(10)
		area := draw.Crop(dc, margin, -(legW + 3*margin), margin, -margin)
		tiles := draw.Tiles{Rows: 2, Cols: 2, PadX: 28, PadY: 22}
		canvases := plot.Align(plots, tiles, area)
		for j := range plots {
			for i := range plots[j] {
				plots[j][i].Draw(canvases[j][i])
			}
		}
		top := (dc.Min.Y+dc.Max.Y)/2 + legH/2
		leg.Draw(dc, vg.Point{X: dc.Max.X - legW - margin, Y: top})
	}
	return fig, nil
}

// OnlineMetric is online_<metric> (e.g. online_ttft_ms): one metric, 5.2 in
// wide (wider when the legend needs it), legend above in three columns.
func OnlineMetric(on *results.Online, metricKey string) (*Figure, error) {
	var m *latencyMetric
	for i := range latencyMetrics {
		if latencyMetrics[i].Key == metricKey {
			m = &latencyMetrics[i]
		}
	}
	if m == nil {
		return nil, fmt.Errorf("unknown latency metric %q", metricKey)
	}
	backends := onlineBackends(on)
	if len(backends) == 0 {
		return nil, ErrNoOnlineData
	}
	sz := paperSizes
	p := newLatencyPlot(*m, backends, modeFull, sz, "", true)
	leg := legend{Entries: legendEntries(backends, modeFull, sz), Cols: 3, Style: textStyle(sz.Legend)}
	legW, legH := leg.Size()
	const margin = vg.Length(10)
	width := max(5.2*vg.Inch, legW+2*margin)
	fig := &Figure{Name: "online_" + m.Key, Width: width, Height: 3.6*vg.Inch + legH + margin, DPI: 150}
	fig.draw = func(dc draw.Canvas) {
		leg.Draw(dc, vg.Point{X: (dc.Min.X + dc.Max.X - legW) / 2, Y: dc.Max.Y - margin/2})
		p.Draw(draw.Crop(dc, margin/2, -margin, margin/2, -(legH + margin)))
	}
	return fig, nil
}

// OnlineFigures returns the default online figures (the 2×2 compare and one
// per metric) unless noDefault, plus one percentile-only figure per entry of
// percentiles ("p90", "p99").
func OnlineFigures(on *results.Online, noDefault bool, percentiles []string) ([]*Figure, error) {
	var figs []*Figure
	if !noDefault {
		f, err := OnlineLatencyCompare(on)
		if err != nil {
			return nil, err
		}
		figs = append(figs, f)
		for _, m := range latencyMetrics {
			f, err := OnlineMetric(on, m.Key)
			if err != nil {
				return nil, err
			}
			figs = append(figs, f)
		}
	}
	for _, p := range percentiles {
		f, err := OnlinePercentileOnly(on, p)
		if err != nil {
			return nil, err
		}
		figs = append(figs, f)
	}
	return figs, nil
}
