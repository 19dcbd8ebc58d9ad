package arch

import "fmt"

// TensorSpec is one parameter of a family: its canonical name and shape,
// which the ops and devices use, and where and how a checkpoint stores it.
//
// The canonical layout, the one the devices agree on: fp32, row-major;
// a matrix is (out, in), rows of the input width, as torch's nn.Linear
// stores it and as llm.c's matmul reads it (out = in · Wᵀ + b); an embedding
// table is (rows, C); norm scales and biases are vectors. Per-layer tensors
// are stacked along a leading L axis, so layer l's slice is a contiguous
// 1/L of the tensor.
type TensorSpec struct {
	Name     string // canonical name the ops read, e.g. "attn.qkv.weight"
	Shape    []int  // canonical shape, of one layer's slice if PerLayer
	PerLayer bool   // stacked (L, Shape...)
	// File is the name in model.safetensors; a per-layer one formats the
	// layer index with its one %d ("h.%d.attn.c_attn.weight").
	File string
	// Transposed says the file stores the (out, in) matrix as (in, out):
	// HF's Conv1D, which GPT-2 uses. Loading transposes it into the
	// canonical layout and writing transposes it back.
	Transposed bool
	// Parts, when set, says the file stores the canonical matrix as
	// several tensors whose rows stack into it in this order (File is then
	// unused): Qwen3's q, k and v projections form one (NH·HS+2·NKV·HS, C)
	// matrix, so one matmul computes a row's q, k and v.
	Parts []TensorPart
}

// TensorPart is one file tensor of a TensorSpec with Parts: its name (a
// per-layer one with %d) and how many of the canonical rows it holds.
type TensorPart struct {
	File string
	Rows int
}

// Size is the element count of one layer's slice (or of the whole tensor).
func (s TensorSpec) Size() int {
	n := 1
	for _, d := range s.Shape {
		n *= d
	}
	return n
}

// Tensor is one parameter in memory: its spec and a view into Weights.Data
// (all L layers of a per-layer tensor).
type Tensor struct {
	TensorSpec
	Data []float32
}

// Layer is layer l's slice of a per-layer tensor.
func (t *Tensor) Layer(l, numLayers int) []float32 {
	n := len(t.Data) / numLayers
	return t.Data[l*n : (l+1)*n : (l+1)*n]
}

// Weights are all parameters of a model in fp32, in one allocation (Data),
// each named tensor a view into it in the canonical layout (TensorSpec), as
// llm.c's ParameterTensors.
type Weights struct {
	Config  Config // complete
	Data    []float32
	Tensors []Tensor // in the family's TensorSpec order, which is Data's
}

// NewWeights allocates zeroed weights for c and points the tensors into one
// buffer.
func NewWeights(c Config) (*Weights, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.Complete()
	f, _ := Lookup(c.Family)
	specs := f.Tensors(c)
	w := &Weights{Config: c, Data: make([]float32, numParameters(specs, c.NumLayers))}
	off := 0
	for _, s := range specs {
		n := s.Size()
		if s.PerLayer {
			n *= c.NumLayers
		}
		w.Tensors = append(w.Tensors, Tensor{TensorSpec: s, Data: w.Data[off : off+n : off+n]})
		off += n
	}
	return w, nil
}

// Tensor returns the tensor of this canonical name; devices resolve the
// names their Program reads once, at construction.
func (w *Weights) Tensor(name string) (*Tensor, error) {
	for i := range w.Tensors {
		if w.Tensors[i].Name == name {
			return &w.Tensors[i], nil
		}
	}
	return nil, fmt.Errorf("model: no tensor %q in the %s weights", name, w.Config.Family)
}

func numParameters(specs []TensorSpec, numLayers int) int {
	n := 0
	for _, s := range specs {
		if s.PerLayer {
			n += numLayers * s.Size()
		} else {
			n += s.Size()
		}
	}
	return n
}
