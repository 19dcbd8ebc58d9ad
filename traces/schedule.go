package traces

import (
	"fmt"
	"math"
)

// Schedule returns each row's send time in seconds after the replay start:
// t = (timestamp − min timestamp) · scale + offsetS, as the original harness.
// A scale below 1 compresses the trace (more load). Rows keep their order.
func Schedule(rows []Row, scale, offsetS float64) ([]float64, error) {
	if !(scale > 0) || math.IsInf(scale, 0) {
		return nil, fmt.Errorf("scale must be a positive number, got %v", scale)
	}
	if math.IsNaN(offsetS) || math.IsInf(offsetS, 0) {
		return nil, fmt.Errorf("start offset must be finite, got %v", offsetS)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	minTS := rows[0].TimestampS
	for _, r := range rows[1:] {
		minTS = math.Min(minTS, r.TimestampS)
	}
	at := make([]float64, len(rows))
	for i, r := range rows {
		at[i] = (r.TimestampS-minTS)*scale + offsetS
	}
	return at, nil
}
