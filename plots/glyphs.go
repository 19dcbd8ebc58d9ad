package plots

import (
	"math"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// markerGlyph draws a matplotlib-style marker, filled or as an outline.
// gonum/plot ships only circles, squares and triangles, and the original
// uses diamonds, hexagons, pentagons and more to tell backends apart.
type markerGlyph struct {
	Shape     string
	Hollow    bool
	LineWidth vg.Length // outline width when Hollow
}

// DrawGlyph implements draw.GlyphDrawer. The caller has set the color.
func (g markerGlyph) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	path := markerPath(g.Shape, pt, sty.Radius)
	if g.Hollow {
		c.SetLineStyle(draw.LineStyle{Color: sty.Color, Width: g.LineWidth})
		c.Stroke(path)
		return
	}
	c.Fill(path)
}

// markerPath outlines a marker of radius r centred on pt. Shapes follow
// matplotlib's letters: o circle, s square, D diamond, d thin diamond, ^ v < >
// triangles, p pentagon, h/H hexagon (point/flat up), 8 octagon, P filled
// plus, * star.
func markerPath(shape string, pt vg.Point, r vg.Length) vg.Path {
	switch shape {
	case "s":
		return polygonPath(pt, r*1.2, 4, 45, 1)
	case "D":
		return polygonPath(pt, r*1.15, 4, 90, 1)
	case "d":
		return polygonPath(pt, r*1.2, 4, 90, 0.6)
	case "^":
		return polygonPath(pt, r*1.3, 3, 90, 1)
	case "v":
		return polygonPath(pt, r*1.3, 3, -90, 1)
	case "<":
		return polygonPath(pt, r*1.3, 3, 180, 1)
	case ">":
		return polygonPath(pt, r*1.3, 3, 0, 1)
	case "p":
		return polygonPath(pt, r*1.15, 5, 90, 1)
	case "h":
		return polygonPath(pt, r*1.15, 6, 90, 1)
	case "H":
		return polygonPath(pt, r*1.15, 6, 0, 1)
	case "8":
		return polygonPath(pt, r*1.1, 8, 22.5, 1)
	case "P":
		return plusPath(pt, r*1.15)
	case "*":
		return starPath(pt, r*1.4)
	}
	var p vg.Path
	p.Move(vg.Point{X: pt.X + r, Y: pt.Y})
	p.Arc(pt, r, 0, 2*math.Pi)
	p.Close()
	return p
}

// polygonPath is a regular n-gon of circumradius r whose first vertex is at
// angle startDeg, squeezed horizontally by xScale.
func polygonPath(pt vg.Point, r vg.Length, n int, startDeg, xScale float64) vg.Path {
	return closedPath(n, func(i int) vg.Point {
		a := (startDeg + 360*float64(i)/float64(n)) * math.Pi / 180
		return vg.Point{X: pt.X + r*vg.Length(xScale*math.Cos(a)), Y: pt.Y + r*vg.Length(math.Sin(a))}
	})
}

// closedPath joins the n points vertex(0)..vertex(n-1) in order and closes
// the outline back to the first: every non-circle marker is such a polygon.
func closedPath(n int, vertex func(i int) vg.Point) vg.Path {
	var p vg.Path
	for i := 0; i < n; i++ {
		if v := vertex(i); i == 0 {
			p.Move(v)
		} else {
			p.Line(v)
		}
	}
	p.Close()
	return p
}

// plusPath is a filled plus sign whose arms are a third of its width.
func plusPath(pt vg.Point, r vg.Length) vg.Path {
	a := r / 3
	pts := [][2]vg.Length{
		{-a, r}, {a, r}, {a, a}, {r, a}, {r, -a}, {a, -a},
		{a, -r}, {-a, -r}, {-a, -a}, {-r, -a}, {-r, a}, {-a, a},
	}
	return closedPath(len(pts), func(i int) vg.Point {
		return vg.Point{X: pt.X + pts[i][0], Y: pt.Y + pts[i][1]}
	})
}

// starPath is a five-pointed star.
func starPath(pt vg.Point, r vg.Length) vg.Path {
	return closedPath(10, func(i int) vg.Point {
		rad := r
		if i%2 == 1 {
			rad = r * 0.4
		}
		a := (90 + 36*float64(i)) * math.Pi / 180
		return vg.Point{X: pt.X + rad*vg.Length(math.Cos(a)), Y: pt.Y + rad*vg.Length(math.Sin(a))}
	})
}

// crossGlyph is the invalid-scale mark: a bold X.
type crossGlyph struct{ LineWidth vg.Length }

func (g crossGlyph) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	ls := draw.LineStyle{Color: sty.Color, Width: g.LineWidth}
	r := sty.Radius
	c.StrokeLine2(ls, pt.X-r, pt.Y-r, pt.X+r, pt.Y+r)
	c.StrokeLine2(ls, pt.X-r, pt.Y+r, pt.X+r, pt.Y-r)
}
