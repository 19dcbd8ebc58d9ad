package metrics

import "github.com/roseinfer/roseinfer/results"

// OfflineThroughput computes the offline figures, docs/METRICS.md: "req/s =
// prompts / total time; output tok/s = Σ generated tokens / total time;
// total tok/s = (Σ prompt tokens + Σ generated tokens) / total time".
// totalS is the timed region, "from the first prompt submitted to the last
// token of the last prompt (model load and warmup excluded)"; like the
// original it is floored at 1e-9 s.
func OfflineThroughput(numPrompts, promptTokens, outputTokens int, totalS float64) (reqPerS, outputTokPerS, totalTokPerS float64) {
	d := max(totalS, minDurationS)
	return float64(numPrompts) / d, float64(outputTokens) / d, float64(promptTokens+outputTokens) / d
}

// FillOffline sets an offline result's three throughputs from its counts and
// TotalS ("total latency (s)" in the summary table).
func FillOffline(r *results.OfflineResult) {
	r.RequestThroughputRPS, r.OutputThroughputTPS, r.TotalThroughputTPS =
		OfflineThroughput(r.NumPrompts, r.TotalInputTokens, r.TotalOutputTokens, r.TotalS)
}

// SummarizeOfflineRounds combines --repeat M offline rounds of one backend.
// The aggregate is one average round: TotalS and the token totals are
// per-round means (token totals are exact whenever every round generates
// the same number of tokens, as with ignore_eos), prefill/decode times are
// means when every round has them, and the throughputs are Σ counts / Σ
// time. Rounds keeps each round (Round 1..M); Spread holds the mean and 95%
// CI of request_throughput_rps, output_throughput_tps, total_throughput_tps
// and total_s across rounds. Fields not named here are round 1's.
func SummarizeOfflineRounds(rounds []results.OfflineResult) results.OfflineResult {
	if len(rounds) == 0 {
		return results.OfflineResult{}
	}
	if len(rounds) == 1 {
		return rounds[0]
	}
	agg := rounds[0]
	m := len(rounds)
	var prompts, in, out int
	var totalS, prefillS, decodeS float64
	havePhases := true
	perRound := make([]results.OfflineResult, m)
	figures := map[string][]float64{}
	for i, r := range rounds {
		r.Round = i + 1
		perRound[i] = r
		prompts += r.NumPrompts
		in += r.TotalInputTokens
		out += r.TotalOutputTokens
		totalS += r.TotalS
		if r.PrefillS == nil || r.DecodeS == nil {
			havePhases = false
		} else {
			prefillS += *r.PrefillS
			decodeS += *r.DecodeS
		}
		figures["request_throughput_rps"] = append(figures["request_throughput_rps"], r.RequestThroughputRPS)
		figures["output_throughput_tps"] = append(figures["output_throughput_tps"], r.OutputThroughputTPS)
		figures["total_throughput_tps"] = append(figures["total_throughput_tps"], r.TotalThroughputTPS)
		figures["total_s"] = append(figures["total_s"], r.TotalS)
	}
	agg.Round = 0
	agg.NumPrompts, agg.TotalInputTokens, agg.TotalOutputTokens = prompts/m, in/m, out/m
	agg.TotalS = totalS / float64(m)
	agg.PrefillS, agg.DecodeS = nil, nil
	if havePhases {
		agg.PrefillS, agg.DecodeS = ptr(prefillS/float64(m)), ptr(decodeS/float64(m))
	}
	agg.RequestThroughputRPS, agg.OutputThroughputTPS, agg.TotalThroughputTPS = OfflineThroughput(prompts, in, out, totalS)
	agg.Rounds = perRound
	agg.Spread = map[string]results.Spread{}
	for key, values := range figures {
		agg.Spread[key] = SpreadOf(values)
	}
	return agg
}
