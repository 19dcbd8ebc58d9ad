package main

import (
	"fmt"
	"math"
	"strconv"
)

// maxDecodeContext bounds -ctx: far past any model's positions, and small
// enough that the KV cache's block count cannot overflow.
const maxDecodeContext = 1 << 20

// checkContexts rejects decode contexts that cannot be laid out: ctx
// outside 1 .. maxDecodeContext, a range ratio outside [0, 1), or a
// shortest context under one token.
func checkContexts(ctx int, ratio float64) error {
	if ctx < 1 || ctx > maxDecodeContext {
		return fmt.Errorf("-ctx %d: want 1 to %d", ctx, maxDecodeContext)
	}
	if !(ratio >= 0 && ratio < 1) {
		return fmt.Errorf("-ctx-range-ratio %v: want 0 <= r < 1", ratio)
	}
	if lo, _ := ctxBounds(ctx, ratio); lo < 1 {
		return fmt.Errorf("-ctx %d with -ctx-range-ratio %v leaves contexts of %d tokens: raise -ctx or lower the ratio", ctx, ratio, lo)
	}
	return nil
}

// ctxBounds is the shortest and longest decode context: ctx × (1 - ratio)
// and ctx × (1 + ratio), rounded inwards (both ctx without a range), as
// vLLM's --random-range-ratio draws its lengths.
func ctxBounds(ctx int, ratio float64) (lo, hi int) {
	return int(math.Ceil(float64(ctx) * (1 - ratio))), int(math.Floor(float64(ctx) * (1 + ratio)))
}

// ctxLabel names the decode contexts in the report: "300", or "300±50%".
func ctxLabel(ctx int, ratio float64) string {
	if ratio == 0 {
		return strconv.Itoa(ctx)
	}
	return fmt.Sprintf("%d±%g%%", ctx, 100*ratio)
}
