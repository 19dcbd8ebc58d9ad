// Package plots draws the benchmark figures of the original harness with
// gonum/plot: online latency against trace scale and offline throughput
// bars, as PNG and SVG. It reads only results types; the same input
// always gives the same bytes (no clocks, no map order, fonts embedded).
package plots

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Figure is one rendered-on-demand figure.
type Figure struct {
	Name          string // file stem, e.g. "online_latency_compare"
	Width, Height vg.Length
	DPI           int // PNG resolution
	draw          func(dc draw.Canvas)
}

// PixelSize is the PNG's size in pixels.
func (f *Figure) PixelSize() (w, h int) {
	px := func(l vg.Length) int { return int(float64(l/vg.Inch)*float64(f.DPI) + 0.5) }
	return px(f.Width), px(f.Height)
}

// PNG renders the figure as a PNG image at its DPI.
func (f *Figure) PNG() ([]byte, error) {
	img := vgimg.NewWith(vgimg.UseWH(f.Width, f.Height), vgimg.UseDPI(f.DPI))
	if err := f.drawSafely(draw.New(img)); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("encode %s.png: %w", f.Name, err)
	}
	return buf.Bytes(), nil
}

// SVG renders the figure as an SVG document (fonts referenced by name, not
// embedded, so the file stays small; browsers fall back to their serif).
func (f *Figure) SVG() ([]byte, error) {
	c := vgsvg.New(f.Width, f.Height)
	if err := f.drawSafely(draw.New(c)); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("encode %s.svg: %w", f.Name, err)
	}
	return buf.Bytes(), nil
}

// drawSafely turns a panic inside gonum/plot (it panics on some degenerate
// inputs) into an error: a figure must never crash the command.
func (f *Figure) drawSafely(dc draw.Canvas) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("draw %s: %v", f.Name, r)
		}
	}()
	f.draw(dc)
	return nil
}

// Formats the figures can be written in.
var Formats = []string{"png", "svg"}

// WriteFiles renders each figure in each format into dir (created) as
// <name>.<format> and returns the paths written, in order.
func WriteFiles(dir string, figs []*Figure, formats ...string) ([]string, error) {
	if len(formats) == 0 {
		formats = Formats
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create figure dir: %w", err)
	}
	var paths []string
	for _, f := range figs {
		for _, format := range formats {
			var data []byte
			var err error
			switch format {
			case "png":
				data, err = f.PNG()
			case "svg":
				data, err = f.SVG()
			default:
				return paths, fmt.Errorf("unknown figure format %q (want png or svg)", format)
			}
			if err != nil {
				return paths, err
			}
			path := filepath.Join(dir, f.Name+"."+format)
			if err := os.WriteFile(path, data, 0o644); err != nil {
				return paths, fmt.Errorf("write figure: %w", err)
			}
			paths = append(paths, path)
		}
	}
	return paths, nil
}

// niceMax pads the top of an axis so the highest mark is not cut in half.
func niceMax(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	return v * 1.08
}
