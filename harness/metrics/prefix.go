package metrics

import "github.com/roseinfer/roseinfer/results"

// PrefixCache compares, over the successful requests, the prompt tokens the
// server's prefix cache supplied (usage_cached_tokens, vLLM's
// usage.prompt_tokens_details.cached_tokens) with those the workload implies
// could be (prefix_implied_tokens: a later turn's whole history, a first
// prompt's longest prefix shared with an earlier prompt of the replay):
//
//	implied_hit_rate   = Σ implied / Σ input_len
//	measured_hit_rate  = Σ cached / Σ input_len
//	implied_hits_found = Σ min(cached, implied) / Σ implied
//
// Once any request reported cached_tokens, a request without it counts 0
// (vLLM leaves the details out when nothing was cached); when none did, the
// cached figures are null. The rates are null when their denominator is 0.
// Nil when no request carries either count (records made before them).
func PrefixCache(reqs []results.Request) *results.PrefixCache {
	pc := &results.PrefixCache{}
	hasImplied, hasCached := false, false
	var cached, found int64
	for i := range reqs {
		r := &reqs[i]
		hasImplied = hasImplied || r.PrefixImpliedTokens != nil
		hasCached = hasCached || r.UsageCachedTokens != nil
		if !Succeeded(r) {
			continue
		}
		pc.NumRequests++
		if r.Turn > 1 {
			pc.NumSessionTurns++
		}
		pc.PromptTokens += int64(r.InputLen)
		implied := 0
		if r.PrefixImpliedTokens != nil {
			implied = *r.PrefixImpliedTokens
		}
		pc.ImpliedTokens += int64(implied)
		if r.UsageCachedTokens != nil {
			pc.NumReported++
			cached += int64(*r.UsageCachedTokens)
			found += int64(min(*r.UsageCachedTokens, implied))
		}
	}
	if !hasImplied && !hasCached {
		return nil
	}
	rate := func(num, den int64) *float64 {
		if den <= 0 {
			return nil
		}
		return ptr(float64(num) / float64(den))
	}
	pc.ImpliedHitRate = rate(pc.ImpliedTokens, pc.PromptTokens)
	if hasCached {
		pc.CachedTokens, pc.CachedOfImplied = &cached, &found
		pc.MeasuredHitRate = rate(cached, pc.PromptTokens)
		pc.ImpliedHitsFound = rate(found, pc.ImpliedTokens)
	}
	return pc
}
