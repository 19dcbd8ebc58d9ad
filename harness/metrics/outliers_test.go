package metrics

import (
	"reflect"
	"testing"

	"github.com/roseinfer/roseinfer/results"
)

func TestITLOutliers(t *testing.T) {
	msg := "broken"
	for _, tc := range []struct {
		name        string
		r           results.Request
		thresholdMs float64
		want        []ITLOutlier
	}{
		// Gaps 62.5, 62.5, 125 ms of one token each: only the last is above 100.
		{"one token chunks", oneTokenChunks(), 100, []ITLOutlier{{Prev: 2, Chunk: 3, ITLMs: 125}}},
		// A sample equal to the threshold is not above it.
		{"equal is not above", oneTokenChunks(), 125, nil},
		// Chunks of 4 and 2 tokens, gaps 125 and 250 ms: per-token 31.25 and 125.
		{"per token, one outlier per chunk", multiTokenChunks(), 100, []ITLOutlier{{Prev: 1, Chunk: 2, ITLMs: 125}}},
		// A chunk with no token (finish-only) is skipped: the gap spans it.
		{"tokenless chunk skipped", results.Request{ChunkS: []float64{0.25, 0.3125, 0.5}, ChunkTokens: []int{1, 0, 1}},
			200, []ITLOutlier{{Prev: 0, Chunk: 2, ITLMs: 250}}},
		{"failed request", results.Request{Error: &msg, ChunkS: []float64{0, 1}, ChunkTokens: []int{1, 1}}, 1, nil},
		{"inconsistent arrays", results.Request{ChunkS: []float64{0, 1}, ChunkTokens: []int{1}}, 1, nil},
		{"absurd count", results.Request{ChunkS: []float64{0, 1, 2}, ChunkTokens: []int{1, 1, 1 << 30}}, 1, nil},
		{"single token", singleToken(), 0, nil},
	} {
		if got := ITLOutliers(&tc.r, tc.thresholdMs); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestITLOutliersAboveP99: against a real summary, the outliers are exactly
// the ITL samples above its p99, counted once per chunk.
func TestITLOutliersAboveP99(t *testing.T) {
	var reqs []results.Request
	for i := range 10 {
		r := results.Request{ChunkS: []float64{0}, ChunkTokens: []int{1}}
		for j := 1; j <= 20; j++ {
			gap := 0.0078125 // 7.8125 ms
			if i == 3 && j == 10 {
				gap = 0.0625 // one slow gap of 62.5 ms
			}
			r.ChunkS = append(r.ChunkS, r.ChunkS[j-1]+gap)
			r.ChunkTokens = append(r.ChunkTokens, 1)
		}
		reqs = append(reqs, r)
	}
	s := SummarizeScale(reqs, ScaleOptions{})
	n := 0
	for i := range reqs {
		for _, o := range ITLOutliers(&reqs[i], *s.ITLMs.P99) {
			if i != 3 || o.Chunk != 10 {
				t.Errorf("request %d chunk %d flagged (%.3f ms, p99 %.3f)", i, o.Chunk, o.ITLMs, *s.ITLMs.P99)
			}
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d outliers above p99 %.3f ms, want the one slow gap", n, *s.ITLMs.P99)
	}
}
