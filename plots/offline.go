package plots

import (
	"errors"
	"image/color"
	"math"
	"strings"

	"github.com/roseinfer/roseinfer/results"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// ErrNoOfflineData is returned when an offline results file has no rows.
var ErrNoOfflineData = errors.New("no offline results to plot")

type throughputMetric struct {
	Key, Title, Unit string
	get              func(*results.OfflineResult) float64
}

var throughputMetrics = []throughputMetric{
	{"output_throughput_tps", "Output Throughput (tok/s)", "tok/s", func(r *results.OfflineResult) float64 { return r.OutputThroughputTPS }},
	{"request_throughput_rps", "Request Throughput (req/s)", "req/s", func(r *results.OfflineResult) float64 { return r.RequestThroughputRPS }},
	{"total_throughput_tps", "Total Throughput (tok/s)", "tok/s", func(r *results.OfflineResult) float64 { return r.TotalThroughputTPS }},
}

// shortTags are the ablation tick labels, one tag per line (E.6).
var shortTags = map[string]string{
	"-fused ops": "-ops", "-fused MLP": "-MLP", "-fused sampler": "-samp", "-fused KV": "-KV",
	"-overlap sched": "-overlap", "-async stream": "-async", "-batch send": "-batch", "-flat evts": "-flat",
}

// offlineTickLabel is a row's y tick label: the display name, or for a
// roseinfer ablation its short tags one per line; failed runs get a last line
// "OOM" (out of memory) or "ERR". Unlike the original, plain labels such as
// vllm are tagged too: an empty bar with no reason reads as a zero result.
func offlineTickLabel(label string, r *results.OfflineResult) string {
	name := results.BackendDisplayName(label)
	if inner, ok := strings.CutPrefix(name, "roseinfer ("); ok && strings.HasSuffix(inner, ")") {
		var tags []string
		for _, part := range strings.Split(strings.TrimSuffix(inner, ")"), ",") {
			part = strings.TrimSpace(part)
			if short, ok := shortTags[part]; ok {
				part = short
			}
			if part != "" {
				tags = append(tags, part)
			}
		}
		if len(tags) > 0 {
			name = strings.Join(tags, "\n")
		}
	}
	if failed, tag := offlineFailure(r); failed {
		name += "\n" + tag
	}
	return name
}

// offlineFailure says whether a row failed and how to tag it.
func offlineFailure(r *results.OfflineResult) (bool, string) {
	errText, _ := r.Extra["error"].(string)
	if r.OutputThroughputTPS > 0 && errText == "" {
		return false, ""
	}
	if strings.Contains(strings.ToLower(errText), "out of memory") {
		return true, "OOM"
	}
	return true, "ERR"
}

// hbars draws one horizontal bar per row, first row on top, with optional
// 95% CI whiskers from repeat rounds.
type hbars struct {
	values []float64
	cis    []*interval
	colors []color.Color
}

func (b hbars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	n := len(b.values)
	for i, v := range b.values {
		y := float64(n - 1 - i)
		lo, hi := trY(y-0.32), trY(y+0.32)
		x0, x1 := trX(0), trX(math.Max(v, 0))
		rect := []vg.Point{{X: x0, Y: lo}, {X: x1, Y: lo}, {X: x1, Y: hi}, {X: x0, Y: hi}}
		if x1 > x0 {
			c.FillPolygon(b.colors[i], c.ClipPolygonXY(rect))
			outline := append(rect, rect[0])
			c.StrokeLines(draw.LineStyle{Color: color.Black, Width: 0.8}, c.ClipLinesXY(outline)...)
		}
		if ci := b.cis[i]; ci != nil {
			drawErrorBar(&c, color.Black, trY(y), trX(ci.Low), trX(ci.High), false)
		}
	}
}

// rowTicks labels row positions (first result on top).
type rowTicks []string

func (t rowTicks) Ticks(_, _ float64) []plot.Tick {
	ticks := make([]plot.Tick, len(t))
	for i, label := range t {
		ticks[i] = plot.Tick{Value: float64(len(t) - 1 - i), Label: label}
	}
	return ticks
}

// OfflineThroughputCompare is offline_throughput_compare: three horizontal
// bar charts sharing the rows (output tok/s, req/s, total tok/s), rows in the
// file's order, 13.5 in wide.
func OfflineThroughputCompare(off *results.Offline) (*Figure, error) {
	rows := off.Results
	if len(rows) == 0 {
		return nil, ErrNoOfflineData
	}
	labels := make([]string, len(rows))
	for i := range rows {
		labels[i] = rows[i].Backend
	}
	canon := results.CanonicalLabels(labels)
	ordered := make([]string, len(rows))
	for i, l := range labels {
		ordered[i] = canon[l]
	}
	styles := assignStyles(ordered)
	ticks := make(rowTicks, len(rows))
	colors := make([]color.Color, len(rows))
	for i := range rows {
		ticks[i] = offlineTickLabel(ordered[i], &rows[i])
		colors[i] = styles[ordered[i]].Color
	}
	tickFont := vg.Length(8)
	switch {
	case len(rows) > 22:
		tickFont = 6
	case len(rows) > 16:
		tickFont = 7
	}

	panels := [][]*plot.Plot{make([]*plot.Plot, len(throughputMetrics))}
	for j, m := range throughputMetrics {
		p := newPlot(paperSizes)
		p.Title.Text = m.Title
		p.X.Label.Text = m.Unit
		bars := hbars{values: make([]float64, len(rows)), cis: make([]*interval, len(rows)), colors: colors}
		maxVal := 0.0
		for i := range rows {
			v := m.get(&rows[i])
			if math.IsNaN(v) || math.IsInf(v, 0) {
				v = 0
			}
			bars.values[i] = v
			bars.cis[i] = spreadInterval(rows[i].Spread, m.Key)
			maxVal = math.Max(maxVal, v)
			if bars.cis[i] != nil {
				maxVal = math.Max(maxVal, bars.cis[i].High)
			}
		}
		p.X.Min, p.X.Max = 0, niceMax(maxVal)
		p.Y.Min, p.Y.Max = -0.6, float64(len(rows))-0.4
		p.Y.Tick.Label.Font.Size = tickFont
		if j == 0 {
			p.Y.Tick.Marker = ticks
		} else {
			p.Y.Tick.Marker = make(rowTicks, len(rows)) // tick marks, labels only on the first panel
		}
		grid := plotter.NewGrid()
		grid.Horizontal.Color = nil
		grid.Vertical = draw.LineStyle{Color: color.NRGBA{A: 90}, Width: 0.6, Dashes: []vg.Length{3, 3}}
		p.Add(grid, bars)
		panels[0][j] = p
	}

	height := vg.Length(math.Max(4.6, math.Min(12, 0.46*float64(len(rows))))) * vg.Inch
	fig := &Figure{Name: "offline_throughput_compare", Width: 13.5 * vg.Inch, Height: height, DPI: 150}
	fig.draw = func(dc draw.Canvas) {
		const margin = vg.Length(10)
		area := draw.Crop(dc, margin, -margin, margin, -margin)
		tiles := draw.Tiles{Rows: 1, Cols: len(throughputMetrics), PadX: 24}
		canvases := plot.Align(panels, tiles, area)
		for j, p := range panels[0] {
			p.Draw(canvases[0][j])
		}
	}
	return fig, nil
}
