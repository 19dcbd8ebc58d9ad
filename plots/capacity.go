package plots

import (
	"cmp"
	"errors"
	"fmt"
	"image/color"
	"math"
	"slices"

	"github.com/roseinfer/roseinfer/results"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// ErrNoCapacityData is returned when a capacity.json has no probe.
var ErrNoCapacityData = errors.New("no capacity probes to plot")

// capacitySeries is one backend's probes, in rate order.
type capacitySeries struct {
	Name   string
	Style  seriesStyle
	Probes []results.CapacityProbe
	Answer *float64 // capacity_req_s
}

// capacityPanel draws SLO attainment (%) against offered rate: per backend
// a line through the mean attainment at each rate, a filled marker per
// passing probe and a hollow one per failing probe, a red cross on an
// invalid probe, the goodput target as a dashed horizontal line and the
// answer as a dashed vertical line in the backend's color.
type capacityPanel struct {
	series []*capacitySeries
	target float64 // %
	sz     sizes
}

func (cp *capacityPanel) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	dashed := func(clr color.Color) draw.LineStyle {
		return draw.LineStyle{Color: clr, Width: 1.2, Dashes: []vg.Length{5, 3}}
	}
	c.StrokeLines(dashed(color.NRGBA{A: 160}), c.ClipLinesXY([]vg.Point{{X: c.Min.X, Y: trY(cp.target)}, {X: c.Max.X, Y: trY(cp.target)}})...)
	// Each answer's label sits left of its line, one text row lower per
	// backend so that close answers stay legible.
	row := 0
	for _, s := range cp.series {
		if s.Answer == nil {
			continue
		}
		x := trX(*s.Answer)
		c.StrokeLines(dashed(s.Style.Color), c.ClipLinesXY([]vg.Point{{X: x, Y: c.Min.Y}, {X: x, Y: c.Max.Y}})...)
		sty := textStyle(cp.sz.Tick)
		sty.Color = s.Style.Color
		sty.XAlign, sty.YAlign = draw.XRight, draw.YTop
		at := vg.Point{X: x - 4, Y: trY(cp.target) - 6 - vg.Length(row)*cp.sz.Tick*1.5}
		if c.Contains(vg.Point{X: x, Y: at.Y}) {
			c.FillText(sty, at, fmt.Sprintf("capacity %s req/s", plainNumber(roundSig(*s.Answer, 4))))
		}
		row++
	}
	for _, s := range cp.series {
		var line []vg.Point
		for _, pt := range meanByRate(s.Probes) {
			line = append(line, vg.Point{X: trX(pt[0]), Y: trY(pt[1])})
		}
		if len(line) > 1 {
			c.StrokeLines(draw.LineStyle{Color: s.Style.Color, Width: cp.sz.Line}, c.ClipLinesXY(line)...)
		}
		for _, pr := range s.Probes {
			at := vg.Point{X: trX(pr.RateReqS), Y: trY(pr.SLOAttainment * 100)}
			g := markerGlyph{Shape: s.Style.Marker}
			if !pr.Pass {
				g = markerGlyph{Shape: s.Style.Marker, Hollow: true, LineWidth: cp.sz.HollowLine}
				c.DrawGlyph(draw.GlyphStyle{Color: color.White, Radius: cp.sz.MarkerRadius * 1.2, Shape: markerGlyph{Shape: s.Style.Marker}}, at)
			}
			c.DrawGlyph(draw.GlyphStyle{Color: s.Style.Color, Radius: cp.sz.MarkerRadius * 1.2, Shape: g}, at)
			if !pr.Valid {
				c.DrawGlyph(draw.GlyphStyle{Color: invalidColor, Radius: cp.sz.MarkerRadius * 2, Shape: crossGlyph{LineWidth: 1.8}}, at)
			}
		}
	}
}

// meanByRate is (rate, mean attainment %) per distinct rate, rates rising.
func meanByRate(probes []results.CapacityProbe) [][2]float64 {
	var out [][2]float64
	for i := 0; i < len(probes); {
		j, sum := i, 0.0
		for ; j < len(probes) && probes[j].RateReqS == probes[i].RateReqS; j++ {
			sum += probes[j].SLOAttainment * 100
		}
		out = append(out, [2]float64{probes[i].RateReqS, sum / float64(j-i)})
		i = j
	}
	return out
}

// logTicks labels 1, 2 and 5 times the powers of ten in range (every
// integer multiple when that leaves fewer than three), on a log axis.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	pick := func(steps []float64) []plot.Tick {
		var ticks []plot.Tick
		for e := math.Floor(math.Log10(lo)); math.Pow(10, e) <= hi; e++ {
			for _, m := range steps {
				if v := m * math.Pow(10, e); v >= lo && v <= hi {
					ticks = append(ticks, plot.Tick{Value: v, Label: plainNumber(v)})
				}
			}
		}
		return ticks
	}
	if t := pick([]float64{1, 2, 5}); len(t) >= 3 {
		return t
	}
	return pick([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9})
}

// roundSig rounds v to n significant digits, for labels.
func roundSig(v float64, n int) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	k := math.Pow(10, float64(n)-math.Ceil(math.Log10(math.Abs(v))))
	return math.Round(v*k) / k
}

// CapacityGoodput is capacity_goodput: SLO attainment against offered load
// (log axis) for every backend's probes, the goodput target and each
// answer marked; 9×5.5 in at 150 dpi, the legend to the right.
func CapacityGoodput(c *results.Capacity) (*Figure, error) {
	labels := make([]string, 0, len(c.Backends))
	for _, b := range c.Backends {
		labels = append(labels, b.Backend)
	}
	canon := results.CanonicalLabels(labels)
	ordered := make([]string, len(labels))
	for i, l := range labels {
		ordered[i] = canon[l]
	}
	styles := assignStyles(ordered)
	sz := paperSizes
	panel := &capacityPanel{target: c.GoodputTarget * 100, sz: sz}
	lo, hi := math.Inf(1), math.Inf(-1)
	anyInvalid := false
	var entries []legendEntry
	for i, b := range c.Backends {
		s := &capacitySeries{Name: results.BackendDisplayName(ordered[i]), Style: styles[ordered[i]], Answer: b.CapacityReqS}
		for _, pr := range b.Probes {
			if pr.RateReqS > 0 && !math.IsInf(pr.RateReqS, 0) {
				s.Probes = append(s.Probes, pr)
				lo, hi = math.Min(lo, pr.RateReqS), math.Max(hi, pr.RateReqS)
				anyInvalid = anyInvalid || !pr.Valid
			}
		}
		if len(s.Probes) == 0 {
			continue
		}
		slices.SortStableFunc(s.Probes, func(a, b results.CapacityProbe) int { return cmp.Compare(a.RateReqS, b.RateReqS) })
		panel.series = append(panel.series, s)
		text := s.Name + ": no rate passed"
		if s.Answer != nil {
			text = fmt.Sprintf("%s: %s req/s", s.Name, plainNumber(roundSig(*s.Answer, 4)))
		}
		entries = append(entries, legendEntry{Text: text, Thumb: lineMarkerThumb(s.Style.Color, s.Style.Marker, sz)})
	}
	if len(panel.series) == 0 {
		return nil, ErrNoCapacityData
	}
	black := hex("#000000")
	entries = append(entries,
		legendEntry{Text: "pass (filled)", Thumb: lineMarkerThumb(black, "o", sz)},
		legendEntry{Text: "fail (hollow)", Thumb: hollowThumb(black, "o", sz)},
		legendEntry{Text: fmt.Sprintf("target %s%% good", plainNumber(roundSig(c.GoodputTarget*100, 4))),
			Thumb: func(dc *draw.Canvas, r vg.Rectangle) {
				m := mid(r)
				dc.StrokeLine2(draw.LineStyle{Color: color.NRGBA{A: 160}, Width: 1.2, Dashes: []vg.Length{5, 3}}, r.Min.X, m.Y, r.Max.X, m.Y)
			}})
	if anyInvalid {
		entries = append(entries, legendEntry{Text: "invalid (send lag)", Thumb: crossThumb()})
	}

	p := newPlot(sz)
	p.Title.Text = "SLO attainment against offered load"
	p.X.Label.Text = "offered load (req/s, log scale)"
	p.Y.Label.Text = "requests meeting every SLO (%)"
	pad := 1.25
	if hi/lo < 1.5 {
		pad = 1.6
	}
	p.X.Scale = plot.LogScale{}
	p.X.Min, p.X.Max = lo/pad, hi*pad
	p.X.Tick.Marker = logTicks{}
	p.Y.Min, p.Y.Max = 0, 105
	p.Add(panel)

	leg := legend{Entries: entries, Cols: 1, Style: textStyle(sz.Legend)}
	legW, legH := leg.Size()
	fig := &Figure{Name: "capacity_goodput", Width: 9 * vg.Inch, Height: 5.5 * vg.Inch, DPI: 150}
	fig.draw = func(dc draw.Canvas) {
		const margin = vg.Length(10)
		p.Draw(draw.Crop(dc, margin, -(legW + 3*margin), margin, -margin))
		top := (dc.Min.Y+dc.Max.Y)/2 + legH/2
		leg.Draw(dc, vg.Point{X: dc.Max.X - legW - margin, Y: top})
	}
	return fig, nil
}
