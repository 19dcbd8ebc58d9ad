package metrics

import "github.com/roseinfer/roseinfer/results"

// ITLOutlier is one inter-chunk gap of a request whose per-token ITL is an
// outlier: token chunks Prev and Chunk are indices into the record's ChunkS
// (consecutive token chunks; a chunk carrying no token may lie between).
type ITLOutlier struct {
	Prev, Chunk int
	ITLMs       float64 // (a_Chunk − a_Prev) / k_Chunk, in ms
}

// ITLOutliers returns the ITL outliers of one request, docs/METRICS.md: "an
// ITL outlier is a token chunk j > 1 whose per-token ITL (a_j − a_{j−1}) /
// k_j exceeds the round's ITL p99". thresholdMs is that p99 (ms, as in the
// summary, and compared in ms so that a sample equal to the p99 is never
// above it). A chunk of k tokens is one outlier, not k. Nil for a failed
// request, whose ITL is not in the summary either, or when its chunk
// arrays are inconsistent.
func ITLOutliers(r *results.Request, thresholdMs float64) []ITLOutlier {
	if !Succeeded(r) || len(r.ChunkS) != len(r.ChunkTokens) {
		return nil
	}
	var out []ITLOutlier
	prev := -1
	for j, k := range r.ChunkTokens {
		if k > maxChunkTokens {
			return nil
		}
		if k < 1 {
			continue // not a token event
		}
		if prev >= 0 {
			// The same arithmetic as ITL and appendMs, so the sample
			// compared is bit for bit the one the p99 was taken over.
			itl := (r.ChunkS[j] - r.ChunkS[prev]) / float64(k) * 1000
			if itl > thresholdMs {
				out = append(out, ITLOutlier{Prev: prev, Chunk: j, ITLMs: itl})
			}
		}
		prev = j
	}
	return out
}
