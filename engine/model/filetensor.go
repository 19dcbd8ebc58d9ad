package model

import (
	"fmt"

	"github.com/roseinfer/roseinfer/engine/model/arch"
)

// fileTensor is one tensor of model.safetensors: its name and shape in the
// file, and the view of Weights.Data it fills, in the canonical layout.
type fileTensor struct {
	name  string
	shape []int     // as stored
	data  []float32 // canonical view
	// transposed: the file stores the canonical (out, in) matrix as
	// (in, out) = shape.
	transposed bool
}

// fileTensors lists w's tensors in the order a checkpoint stores them:
// consecutive per-layer tensors layer-major (all of layer 0's, then layer
// 1's, ...), the others in spec order.
func fileTensors(w *Weights) []fileTensor {
	L := w.Config.NumLayers
	var fts []fileTensor
	ts := w.Tensors
	for i := 0; i < len(ts); {
		if !ts[i].PerLayer {
			fts = appendFileTensors(fts, &ts[i], -1, ts[i].Data)
			i++
			continue
		}
		j := i
		for j < len(ts) && ts[j].PerLayer {
			j++
		}
		for l := 0; l < L; l++ {
			for k := i; k < j; k++ {
				fts = appendFileTensors(fts, &ts[k], l, ts[k].Layer(l, L))
			}
		}
		i = j
	}
	return fts
}

// appendFileTensors appends the file tensors of t's data (layer l's slice,
// or the whole tensor when l < 0): one, or one per part, each a contiguous
// run of the canonical rows.
func appendFileTensors(fts []fileTensor, t *arch.Tensor, l int, data []float32) []fileTensor {
	name := func(file string) string {
		if l < 0 {
			return file
		}
		return fmt.Sprintf(file, l)
	}
	if len(t.Parts) == 0 {
		return append(fts, newFileTensor(t, name(t.File), data))
	}
	rowWidth := len(data) / t.Shape[0]
	off := 0
	for _, p := range t.Parts {
		n := p.Rows * rowWidth
		fts = append(fts, fileTensor{name: name(p.File), shape: []int{p.Rows, rowWidth}, data: data[off : off+n : off+n]})
		off += n
	}
	return fts
}

func newFileTensor(t *arch.Tensor, name string, data []float32) fileTensor {
	shape := t.Shape
	if t.Transposed {
		shape = []int{t.Shape[1], t.Shape[0]}
	}
	return fileTensor{name: name, shape: shape, data: data, transposed: t.Transposed}
}

// load fills the canonical view from src, the tensor in file layout.
func (ft *fileTensor) load(src []float32) {
	if ft.transposed {
		transpose(ft.data, src, ft.shape[0], ft.shape[1])
	} else {
		copy(ft.data, src)
	}
}

// fileLayout returns the tensor in file layout: the view itself, or its
// transpose in scratch (grown as needed).
func (ft *fileTensor) fileLayout(scratch *[]float32) []float32 {
	if !ft.transposed {
		return ft.data
	}
	if cap(*scratch) < len(ft.data) {
		*scratch = make([]float32, len(ft.data))
	}
	dst := (*scratch)[:len(ft.data)]
	transpose(dst, ft.data, ft.shape[1], ft.shape[0])
	return dst
}

// transpose writes the (rows, cols) row-major matrix src into dst as
// (cols, rows).
func transpose(dst, src []float32, rows, cols int) {
	for r := 0; r < rows; r++ {
		row := src[r*cols : (r+1)*cols]
		for c, v := range row {
			dst[c*rows+r] = v
		}
	}
}
