package plots

import (
	"fmt"
	"image/color"
	"math"
	"strconv"
	"strings"

	"github.com/roseinfer/roseinfer/results"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
)

// seriesStyle is how one backend label is drawn: its color and marker shape
// (a matplotlib marker letter, see markerPath).
type seriesStyle struct {
	Color  color.NRGBA
	Marker string
}

// fixedStyles are the original harness's colors and markers.
var fixedStyles = map[string]seriesStyle{
	"roseinfer":            {hex("#1f77b4"), "o"},
	"roseinfer+flashinfer": {hex("#9467bd"), "D"},
	"roseinfer+flashattn":  {hex("#d62728"), "v"},
	"roseinfer+chunked":    {hex("#8c564b"), "P"},
	"roseinfer+inproc":     {hex("#1f77b4"), "p"},
	"vllm":                 {hex("#ff7f0e"), "s"},
	"sglang":               {hex("#2ca02c"), "^"},
	"trtllm":               {hex("#4d4d4d"), "H"},
}

// ablationStyles give a roseinfer ablation label the color of its first
// matching token that has one and the marker of its first matching token, in
// the original's order. "#" stands for a count (kv256, batch16).
var ablationStyles = []struct {
	token, color, marker string
}{
	{"nofuse", "#7f7f7f", "s"}, {"queueipc", "#17becf", "D"}, {"nobatch", "#c7c7c7", "o"},
	{"batch#", "#4c78a8", "D"}, {"nogc", "#7f7f7f", "d"}, {"nofastsse", "#0f766e", "s"},
	{"gcfreeze", "#4e79a7", "s"}, {"fastsse", "#0f766e", "P"}, {"nothr", "#9467bd", "d"},
	{"noaff", "#8c564b", "<"}, {"noasync", "#c5b0d5", "s"}, {"nofill", "#9edae5", "o"},
	{"nodrain", "#e377c2", "v"}, {"kv#", "#ffbb78", "^"}, {"noflat", "#ff9896", "8"},
	{"streamtok", "#c7c7c7", "s"}, {"nooverlap", "#aec7e8", ">"}, {"slowcnt", "#bcbd22", "h"},
	{"nomlp", "#e377c2", "8"}, {"nosampler", "#bcbd22", "*"}, {"nokv", "#17becf", "h"},
	{"inproc", "", "p"}, {"chunked", "", "P"}, {"flashinfer", "", "D"}, {"flashattn", "", "v"},
}

// spareColors and spareMarkers tell apart labels the rules above would draw
// identically (two unknown backends, roseinfer vs roseinfer+server, ...).
var (
	spareColors = []string{
		"#17becf", "#bcbd22", "#e377c2", "#8c564b", "#9467bd", "#7f7f7f",
		"#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd",
	}
	spareMarkers = []string{"o", "s", "^", "D", "v", "p", "h", "<", ">", "8", "*", "P"}
)

// styleFor is the original's style for one canonical label.
func styleFor(label string) seriesStyle {
	if s, ok := fixedStyles[label]; ok {
		return s
	}
	tokens := results.RoseinferTokens(label)
	if tokens == nil {
		return seriesStyle{hex("#333333"), "o"}
	}
	st := seriesStyle{Color: fixedStyles["roseinfer"].Color, Marker: "o"}
	colorSet, markerSet := false, false
	for _, rule := range ablationStyles {
		if !hasToken(tokens, rule.token) {
			continue
		}
		if !colorSet && rule.color != "" {
			st.Color, colorSet = hex(rule.color), true
		}
		if !markerSet {
			st.Marker, markerSet = rule.marker, true
		}
	}
	return st
}

// assignStyles styles labels in order; a label whose style repeats an earlier
// one's gets the next unused spare color and marker, so every series in one
// figure can be told apart.
func assignStyles(labels []string) map[string]seriesStyle {
	out := make(map[string]seriesStyle, len(labels))
	used := map[seriesStyle]bool{}
	usedColor := map[color.NRGBA]bool{}
	spare := 0
	for _, label := range labels {
		st := styleFor(label)
		if used[st] {
			for i := 0; i < len(spareColors); i++ {
				c := hex(spareColors[(spare+i)%len(spareColors)])
				if !usedColor[c] {
					st.Color = c
					break
				}
			}
			st.Marker = spareMarkers[spare%len(spareMarkers)]
			spare++
		}
		used[st] = true
		usedColor[st.Color] = true
		out[label] = st
	}
	return out
}

func hasToken(tokens []string, rule string) bool {
	prefix, counted := strings.CutSuffix(rule, "#")
	for _, tok := range tokens {
		if !counted && tok == rule {
			return true
		}
		if counted && strings.HasPrefix(tok, prefix) && len(tok) > len(prefix) && isDigits(tok[len(prefix):]) {
			return true
		}
	}
	return false
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// hex parses "#rrggbb"; the inputs are constants of this file.
func hex(s string) color.NRGBA {
	var r, g, b uint8
	if _, err := fmt.Sscanf(s, "#%02x%02x%02x", &r, &g, &b); err != nil {
		panic("plots: bad color constant " + s)
	}
	return color.NRGBA{R: r, G: g, B: b, A: 255}
}

func withAlpha(c color.NRGBA, alpha float64) color.NRGBA {
	c.A = uint8(alpha*255 + 0.5)
	return c
}

// sizes is the paper style of one figure kind (the original's rcParams).
type sizes struct {
	Title, Label, Tick, Legend vg.Length // font sizes
	Line, MarkerRadius         vg.Length
	HollowLine                 vg.Length
}

var (
	paperSizes   = sizes{Title: 12, Label: 11, Tick: 10, Legend: 10, Line: 2, MarkerRadius: 3.2, HollowLine: 1.2}
	compactSizes = sizes{Title: 11, Label: 10, Tick: 9, Legend: 9, Line: 1.4, MarkerRadius: 2.6, HollowLine: 1}
)

// Fill opacities: the band as the original's alpha 0.12, p99 markers 0.7.
const (
	bandAlpha     = 0.14
	bandEdgeAlpha = 0.55 // the band's p50 edge
	hollowAlpha   = 0.75
)

// textStyle is serif text (Liberation Serif, metric-compatible with Times,
// embedded in gonum/plot so output never depends on system fonts).
func textStyle(size vg.Length) text.Style {
	return text.Style{
		Color:   color.Black,
		Font:    font.From(plot.DefaultFont, size),
		Handler: plot.DefaultTextHandler,
	}
}

// newPlot returns a plot in the paper style: serif text at the given sizes,
// only the left and bottom axes (gonum draws no top/right spines), no grid.
func newPlot(sz sizes) *plot.Plot {
	p := plot.New()
	p.Title.TextStyle.Font = font.From(plot.DefaultFont, sz.Title)
	p.Title.Padding = vg.Points(6)
	for _, ax := range []*plot.Axis{&p.X, &p.Y} {
		ax.Label.TextStyle.Font = font.From(plot.DefaultFont, sz.Label)
		ax.Tick.Label.Font = font.From(plot.DefaultFont, sz.Tick)
		ax.LineStyle.Width = vg.Points(1.1)
		ax.Tick.LineStyle.Width = vg.Points(0.9)
		ax.Padding = vg.Points(2)
		ax.Tick.Marker = plainTicks{}
	}
	return p
}

// plainTicks are gonum's default tick positions labelled without padding
// zeros ("25", "12.5" rather than "25.00").
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = plainNumber(ticks[i].Value)
		}
	}
	return ticks
}

// plainNumber prints v with at most 10 significant digits, no exponent and
// no trailing zeros, hiding float noise such as 12000.000000000002.
func plainNumber(v float64) string {
	rounded, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 10, 64), 64)
	if err != nil || math.IsInf(rounded, 0) {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strconv.FormatFloat(rounded, 'f', -1, 64)
}
