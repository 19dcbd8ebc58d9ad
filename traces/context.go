package traces

import "errors"

// Context fits trace lengths into a model's context exactly as the original
// harness did (rules quoted on Clamp). Zero MaxInputLen/MaxOutputLen mean
// "not set" (the original's None; its --max-output-len defaults to 128).
type Context struct {
	ModelMaxLen    int // the model's max context (GPT-2: 1024)
	OverheadTokens int // --prompt-overhead-tokens (default 8); negative counts as 0
	MaxInputLen    int // --max-input-len; <= 0: not set
	MaxOutputLen   int // --max-output-len; <= 0: not set
}

func (c Context) overhead() int { return max(0, c.OverheadTokens) }

// ServerMaxLen is the context length third-party servers are started with:
// the model's, shrunk to max_in + max_out + overhead + 1 when both maximum
// lengths are set.
func (c Context) ServerMaxLen() int {
	maxLen := c.ModelMaxLen
	if c.MaxInputLen > 0 && c.MaxOutputLen > 0 {
		maxLen = min(maxLen, c.MaxInputLen+c.MaxOutputLen+c.overhead()+1)
	}
	return maxLen
}

// Effective is the token budget a request's input plus output must fit in:
// max(2, ServerMaxLen − overhead − 1). The extra −1 is because some servers
// treat the max context as a strict bound. GPT-2 with overhead 8: 1015.
func (c Context) Effective() int {
	return max(2, c.ServerMaxLen()-c.overhead()-1)
}

// Clamp fits one request's lengths, rule by rule as the original:
//
//	out = min(out, max_output_len)            (when set)
//	out = max(1, min(out, effective − 1))
//	in  = max(1, min(in, effective − out))
//	in  = max(1, min(in, max_input_len))      (when set)
//	if in + out > effective: out = max(1, effective − in)
func (c Context) Clamp(inputLen, outputLen int) (int, int) {
	eff := c.Effective()
	in, out := inputLen, outputLen
	if c.MaxOutputLen > 0 {
		out = min(out, c.MaxOutputLen)
	}
	out = max(1, min(out, eff-1))
	in = max(1, min(in, eff-out))
	if c.MaxInputLen > 0 {
		in = max(1, min(in, c.MaxInputLen))
	}
	if in+out > eff {
		out = max(1, eff-in)
	}
	return in, out
}

// ClampRows returns copies of rows with Clamp applied; HashIDs are shared,
// not copied.
func (c Context) ClampRows(rows []Row) ([]Row, error) {
	if c.ModelMaxLen <= 0 {
		return nil, errors.New("model max context must be positive")
	}
	out := make([]Row, len(rows))
	for i, r := range rows {
		r.InputLen, r.OutputLen = c.Clamp(r.InputLen, r.OutputLen)
		out[i] = r
	}
	return out, nil
}

// WarmupInputLen is the warmup prompt length the original used (C.6):
// min(warmup_input_len, max(1, effective − warmup_output_len)).
func (c Context) WarmupInputLen(warmupInputLen, warmupOutputLen int) int {
	return min(warmupInputLen, max(1, c.Effective()-warmupOutputLen))
}
