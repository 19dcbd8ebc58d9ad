package metrics

import (
	"testing"

	"github.com/roseinfer/roseinfer/results"
)

func intp(v int) *int { return &v }

func TestPrefixCache(t *testing.T) {
	failed := "HTTP 500"
	reqs := []results.Request{
		// A first turn: nothing implied, nothing cached.
		{InputLen: 100, Turn: 1, PrefixImpliedTokens: intp(0), UsageCachedTokens: intp(0)},
		// A second turn: 120 of 150 tokens repeat its history, 112 were hit.
		{InputLen: 150, Turn: 2, ParentIndex: intp(0), PrefixImpliedTokens: intp(120), UsageCachedTokens: intp(112)},
		// Hits beyond the implied ones (an earlier round's prompt) count in
		// the measured rate, not in the share of implied hits found.
		{InputLen: 50, PrefixImpliedTokens: intp(16), UsageCachedTokens: intp(48)},
		// No cached count although others have one: 0 (vLLM omits zeros).
		{InputLen: 100, PrefixImpliedTokens: intp(64)},
		// Failed requests are left out.
		{InputLen: 999, PrefixImpliedTokens: intp(999), UsageCachedTokens: intp(999), Error: &failed},
	}
	pc := PrefixCache(reqs)
	if pc == nil {
		t.Fatal("nil summary")
	}
	if pc.NumRequests != 4 || pc.NumSessionTurns != 1 || pc.NumReported != 3 || pc.PromptTokens != 400 ||
		pc.ImpliedTokens != 200 || *pc.CachedTokens != 160 || *pc.CachedOfImplied != 128 {
		t.Errorf("counts %+v cached %d found %d", pc, *pc.CachedTokens, *pc.CachedOfImplied)
	}
	for name, c := range map[string]struct {
		got  *float64
		want float64
	}{
		"implied_hit_rate":   {pc.ImpliedHitRate, 0.5},
		"measured_hit_rate":  {pc.MeasuredHitRate, 0.4},
		"implied_hits_found": {pc.ImpliedHitsFound, 0.64},
	} {
		if c.got == nil || *c.got != c.want {
			t.Errorf("%s = %v, want %v", name, c.got, c.want)
		}
	}

	// A server that reports nothing: the cached figures are null.
	pc = PrefixCache([]results.Request{{InputLen: 10, PrefixImpliedTokens: intp(5)}})
	if pc.CachedTokens != nil || pc.MeasuredHitRate != nil || pc.ImpliedHitsFound != nil || *pc.ImpliedHitRate != 0.5 {
		t.Errorf("unreported: %+v", pc)
	}
	// Nothing implied: the share found is null, not NaN.
	pc = PrefixCache([]results.Request{{InputLen: 10, PrefixImpliedTokens: intp(0), UsageCachedTokens: intp(0)}})
	if pc.ImpliedHitsFound != nil || *pc.MeasuredHitRate != 0 {
		t.Errorf("nothing implied: %+v", pc)
	}
	// Records without either count (older runs): no summary.
	if pc := PrefixCache([]results.Request{{InputLen: 10}}); pc != nil {
		t.Errorf("old records: %+v", pc)
	}
}
