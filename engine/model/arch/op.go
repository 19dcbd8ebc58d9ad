package arch

import "strconv"

// OpKind is what an op computes. Devices implement kinds, never families; a
// family whose Program needs a new computation adds a kind here and its
// implementation on each device.
type OpKind uint8

const (
	// OpEmbed: Out (rows, C) = Weight[token] (+ Pos[position] when Pos is set).
	OpEmbed OpKind = iota + 1
	// OpLayerNorm: Out (rows, C) = LayerNorm(In) · Weight + Bias, with Eps.
	OpLayerNorm
	// OpLinear: Out (rows, OutDim) = In (rows, InDim) · Weightᵀ (+ Bias),
	// Weight (OutDim, InDim); then the epilogue: Act, and when Accumulate,
	// Out += that result instead of Out = it (a residual add).
	OpLinear
	// OpAttention: causal attention over the paged KV cache. In holds each
	// row's q (NH·HS), k and v (NKV·HS each) side by side. The op first
	// prepares q and k in place: when QNorm and KNorm are set, each head of
	// q and of k gets its own RMSNorm over HS (as OpRMSNorm, weights (HS),
	// Eps); when RopeTheta > 0, each head of q and k is rotated by the row's
	// position (rotary embedding, neox/half-split style as HF's
	// rotate_half: pair (x[j], x[j+HS/2]) turns by angle pos·θ^(-2j/HS)).
	// Then it stores this step's k and v in the layer's cache (NKV·HS per
	// token), and Out (rows, NH·HS) gets each query head's
	// softmax(q·kᵀ/sqrt(HS))·v over the row's sequence up to its own
	// position, query head h reading KV head h/(NH/NKV) (grouped-query
	// attention). Norm and rotation are fields of this op, not ops of their
	// own, so a device can fuse them into the KV-cache write.
	OpAttention
	// OpGELU: Out (rows, InDim) = GELU(In), tanh approximation ("gelu_new").
	OpGELU
	// OpResidual: Out (rows, InDim) += In.
	OpResidual
	// OpRMSNorm: Out (rows, C) = In / sqrt(mean(In²) + Eps) · Weight, no
	// mean subtraction and no bias (InDim = OutDim = C).
	OpRMSNorm
	// OpSwiGLU: Out (rows, I) = SiLU(gate) · up, where In (rows, 2I) holds
	// each row's gate (first I) and up (last I) side by side, as one linear
	// with the gate and up matrices stacked (2I, C) computes them: one
	// matmul over the normed input instead of two. SiLU(x) = x/(1+e^(-x)).
	OpSwiGLU
)

var opKindNames = [...]string{OpEmbed: "embed", OpLayerNorm: "layernorm", OpLinear: "linear",
	OpAttention: "attention", OpGELU: "gelu", OpResidual: "residual",
	OpRMSNorm: "rmsnorm", OpSwiGLU: "swiglu"}

func (k OpKind) String() string {
	if int(k) < len(opKindNames) && opKindNames[k] != "" {
		return opKindNames[k]
	}
	return "OpKind(" + strconv.Itoa(int(k)) + ")"
}

// Act is an activation applied as an OpLinear epilogue.
type Act uint8

const (
	ActNone Act = iota
	ActGELU     // as OpGELU
)

// Buf names an activation buffer. A device allocates each buffer once, as
// wide as the widest op that reads or writes it, with one row per token of
// the step (Embed and Layer ops) or per sampled row (Head ops).
type Buf uint8

const (
	BufResidual Buf = iota // (rows, C) the residual stream
	BufNorm                // (rows, C) a norm's output
	BufQKV                 // (rows, (NH+2·NKV)·HS) queries, keys and values
	BufAtt                 // (rows, NH·HS) attention output, heads side by side
	BufProj                // (rows, C) a projection back to C, before the residual add
	BufHidden              // (rows, I) the MLP's hidden activations
	BufLogits              // (rows, V)
	BufGateUp              // (rows, 2I) an MLP's gate and up projections side by side
	NumBufs
)

var bufNames = [...]string{BufResidual: "residual", BufNorm: "norm", BufQKV: "qkv", BufAtt: "att", BufProj: "proj",
	BufHidden: "hidden", BufLogits: "logits", BufGateUp: "gateup"}

func (b Buf) String() string {
	if int(b) < len(bufNames) {
		return bufNames[b]
	}
	return "Buf(" + strconv.Itoa(int(b)) + ")"
}

// Op is one step of a forward pass: Kind applied to buffer In and the
// tensors it names, writing buffer Out. Sizes are explicit, so a device can
// check every tensor's length once and then run the op without looking
// anything up.
type Op struct {
	Kind          OpKind
	Out, In       Buf
	InDim, OutDim int // row widths of In and Out

	Weight string // canonical tensor name: embedding table, norm scale or (OutDim, InDim) matrix
	Bias   string // norm shift or linear bias; "" = none
	Pos    string // OpEmbed: the learned position table (maxT, C); "" = none

	Eps        float32 // OpLayerNorm, OpRMSNorm, OpAttention's q/k norms
	Act        Act     // OpLinear epilogue
	Accumulate bool    // OpLinear epilogue: Out += result

	NumHeads, NumKVHeads, HeadDim int // OpAttention: NH, NKV, HS

	QNorm, KNorm string  // OpAttention: per-head RMSNorm weights (HS) of q and k; "" = none
	RopeTheta    float64 // OpAttention: rotary base θ; 0 = no rotary positions
}

// Program is a family's forward pass as three flat op lists. Layer ops read
// layer l's slice of per-layer tensors and layer l's KV cache; the device
// runs them for l = 0..L-1. Before Head, the device gathers the residual
// rows of the positions that sample, so Head runs on M rows and reads them
// from BufResidual.
type Program struct {
	Embed []Op // over every token of the step
	Layer []Op // once per layer
	Head  []Op // over the M sampled rows; the last op writes BufLogits (M, V)
}
