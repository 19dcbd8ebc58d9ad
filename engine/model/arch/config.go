package arch

import "fmt"

// Config is what a device needs to know about a model: its family and its
// sizes. It is comparable, so two configs are the same model iff ==.
//
// Fields a family derives (NumKVHeads, HeadDim, Intermediate) may be zero in
// a literal; Complete fills them, and every Config that comes out of a
// family (presets, ParseConfig, Weights.Config) is complete.
type Config struct {
	Family           string  // HF model_type ("gpt2"); "" = LegacyFamily
	NumLayers        int     // L
	NumHeads         int     // NH, query heads
	NumKVHeads       int     // NKV, key/value heads (= NH without grouped-query attention)
	HeadDim          int     // HS
	Channels         int     // C, the residual stream's width (hidden size)
	Intermediate     int     // I, the MLP's hidden width
	MaxSeqLen        int     // maxT
	VocabSize        int     // V
	LayerNormEpsilon float32 // the norms' epsilon (LayerNorm or RMSNorm)
	EOSTokenID       int32   // the token that ends a generation
	RopeTheta        float64 // rotary position base θ (rope_theta); 0 = none (learned positions)
}

// Complete returns c with the sizes its family derives filled in and Family
// spelled out; a config of an unknown family comes back as it is (Validate
// reports it).
func (c Config) Complete() Config {
	f, err := Lookup(c.Family)
	if err != nil {
		return c
	}
	c.Family = f.Name
	return f.Complete(c)
}

// HeadSize is HS.
func (c Config) HeadSize() int { return c.Complete().HeadDim }

// KVChannels is the width of one token's keys (and of its values) in the KV
// cache: NKV·HS.
func (c Config) KVChannels() int {
	c = c.Complete()
	return c.NumKVHeads * c.HeadDim
}

// Validate checks c against its family and the sizes every device relies on.
func (c Config) Validate() error {
	f, err := Lookup(c.Family)
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	c = c.Complete()
	if err := f.Validate(c); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	switch {
	case c.NumLayers < 1 || c.Channels < 1 || c.Intermediate < 1 || c.HeadDim < 1:
		return fmt.Errorf("model: sizes must be positive: %+v", c)
	case c.NumHeads < 1 || c.NumKVHeads < 1 || c.NumHeads%c.NumKVHeads != 0:
		return fmt.Errorf("model: %d KV heads do not divide %d query heads", c.NumKVHeads, c.NumHeads)
	case c.MaxSeqLen < 1 || c.VocabSize < 2:
		return fmt.Errorf("model: %d positions and a vocabulary of %d are too few", c.MaxSeqLen, c.VocabSize)
	case !(c.LayerNormEpsilon > 0):
		return fmt.Errorf("model: norm epsilon %g must be > 0", c.LayerNormEpsilon)
	case c.EOSTokenID < 0 || int(c.EOSTokenID) >= c.VocabSize:
		return fmt.Errorf("model: EOS token %d outside the vocabulary of %d", c.EOSTokenID, c.VocabSize)
	}
	// The whole parameter count must fit an int index; this catches absurd
	// configs before a huge allocation.
	if n := numParameters(f.Tensors(c), c.NumLayers); n <= 0 || n > 1<<40 {
		return fmt.Errorf("model: config gives %d parameters", n)
	}
	return nil
}

// NumParameters is the number of fp32 values in Weights.Data (0 for a
// config of an unknown family).
func (c Config) NumParameters() int {
	f, err := Lookup(c.Family)
	if err != nil {
		return 0
	}
	c = c.Complete()
	return numParameters(f.Tensors(c), c.NumLayers)
}
