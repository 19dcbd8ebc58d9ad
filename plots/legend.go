package plots

import (
	"image/color"

	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// legendEntry is one line of a legend: a small picture and its text.
type legendEntry struct {
	Text  string
	Thumb func(c *draw.Canvas, r vg.Rectangle)
}

// legend lays entries out in columns, filling each column top to bottom
// (matplotlib's order). gonum's own legend can only sit inside the axes; ours
// is drawn into a strip cropped off the figure.
type legend struct {
	Entries []legendEntry
	Cols    int
	Style   text.Style
}

const (
	thumbWidth = vg.Length(26)
	thumbGap   = vg.Length(6)
	colGap     = vg.Length(16)
)

func (l legend) rows() int {
	cols := max(l.Cols, 1)
	return (len(l.Entries) + cols - 1) / cols
}

func (l legend) rowHeight() vg.Length { return l.Style.Font.Size * 1.7 }

// colWidths is each column's width: thumbnail, gap and its widest text.
func (l legend) colWidths() []vg.Length {
	rows := l.rows()
	widths := make([]vg.Length, max(l.Cols, 1))
	for i, e := range l.Entries {
		col := i / max(rows, 1)
		w := thumbWidth + thumbGap + l.Style.Width(e.Text)
		widths[col] = max(widths[col], w)
	}
	return widths
}

// Size is the legend's extent.
func (l legend) Size() (w, h vg.Length) {
	for i, cw := range l.colWidths() {
		if i > 0 {
			w += colGap
		}
		w += cw
	}
	return w, vg.Length(l.rows()) * l.rowHeight()
}

// Draw draws the legend with its top-left corner at the given point.
func (l legend) Draw(c draw.Canvas, topLeft vg.Point) {
	rows := l.rows()
	widths := l.colWidths()
	sty := l.Style
	sty.XAlign = draw.XLeft
	sty.YAlign = draw.YCenter
	x := topLeft.X
	for col := range widths {
		for row := 0; row < rows; row++ {
			i := col*rows + row
			if i >= len(l.Entries) {
				break
			}
			e := l.Entries[i]
			yMid := topLeft.Y - (vg.Length(row)+0.5)*l.rowHeight()
			r := vg.Rectangle{
				Min: vg.Point{X: x, Y: yMid - l.Style.Font.Size*0.5},
				Max: vg.Point{X: x + thumbWidth, Y: yMid + l.Style.Font.Size*0.5},
			}
			e.Thumb(&c, r)
			c.FillText(sty, vg.Point{X: x + thumbWidth + thumbGap, Y: yMid}, e.Text)
		}
		x += widths[col] + colGap
	}
}

func mid(r vg.Rectangle) vg.Point {
	return vg.Point{X: (r.Min.X + r.Max.X) / 2, Y: (r.Min.Y + r.Max.Y) / 2}
}

// Thumbnails.

func lineMarkerThumb(clr color.Color, marker string, sz sizes) func(*draw.Canvas, vg.Rectangle) {
	return func(c *draw.Canvas, r vg.Rectangle) {
		m := mid(r)
		c.StrokeLine2(draw.LineStyle{Color: clr, Width: sz.Line}, r.Min.X, m.Y, r.Max.X, m.Y)
		c.DrawGlyphNoClip(draw.GlyphStyle{Color: clr, Radius: sz.MarkerRadius, Shape: markerGlyph{Shape: marker}}, m)
	}
}

func hollowThumb(clr color.Color, marker string, sz sizes) func(*draw.Canvas, vg.Rectangle) {
	return func(c *draw.Canvas, r vg.Rectangle) {
		c.DrawGlyphNoClip(draw.GlyphStyle{
			Color: clr, Radius: sz.MarkerRadius,
			Shape: markerGlyph{Shape: marker, Hollow: true, LineWidth: sz.HollowLine},
		}, mid(r))
	}
}

func bandThumb(clr color.NRGBA) func(*draw.Canvas, vg.Rectangle) {
	return func(c *draw.Canvas, r vg.Rectangle) {
		c.FillPolygon(withAlpha(clr, bandAlpha*1.6), []vg.Point{
			r.Min, {X: r.Max.X, Y: r.Min.Y}, r.Max, {X: r.Min.X, Y: r.Max.Y},
		})
		c.StrokeLine2(draw.LineStyle{Color: withAlpha(clr, bandEdgeAlpha), Width: 0.9}, r.Min.X, r.Min.Y, r.Max.X, r.Min.Y)
	}
}

func errorBarThumb(clr color.Color) func(*draw.Canvas, vg.Rectangle) {
	return func(c *draw.Canvas, r vg.Rectangle) {
		m := mid(r)
		drawErrorBar(c, clr, m.X, r.Min.Y-2, r.Max.Y+2, true)
	}
}

func crossThumb() func(*draw.Canvas, vg.Rectangle) {
	return func(c *draw.Canvas, r vg.Rectangle) {
		c.DrawGlyphNoClip(draw.GlyphStyle{Color: invalidColor, Radius: 5, Shape: crossGlyph{LineWidth: 1.8}}, mid(r))
	}
}

// invalidColor marks scales whose replay could not keep up with the trace.
var invalidColor = color.NRGBA{R: 0xb0, G: 0x00, B: 0x20, A: 0xff}

// drawErrorBar draws a capped bar from lo to hi at x (vertical) or, with
// vertical false, from lo to hi at y=x (horizontal).
func drawErrorBar(c *draw.Canvas, clr color.Color, at, lo, hi vg.Length, vertical bool) {
	ls := draw.LineStyle{Color: clr, Width: 1.1}
	const capHalf = vg.Length(3.5)
	if vertical {
		c.StrokeLine2(ls, at, lo, at, hi)
		c.StrokeLine2(ls, at-capHalf, lo, at+capHalf, lo)
		c.StrokeLine2(ls, at-capHalf, hi, at+capHalf, hi)
		return
	}
	c.StrokeLine2(ls, lo, at, hi, at)
	c.StrokeLine2(ls, lo, at-capHalf, lo, at+capHalf)
	c.StrokeLine2(ls, hi, at-capHalf, hi, at+capHalf)
}
