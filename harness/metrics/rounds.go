package metrics

import (
	"math"
	"strconv"
	"strings"

	"github.com/roseinfer/roseinfer/results"
)

// SummarizeRounds summarises --repeat M rounds of one (backend, scale).
// Each round gets its own summary (Round 1..M, in Rounds). The aggregate
// (Round 0) pools the rounds' requests for counts and latency statistics;
// its duration is the sum of the rounds' durations, so req/s, tok/s and
// goodput are totals over total time rather than a span across rounds whose
// clocks restart. It is valid only if every round is. Spread holds the
// across-round mean and 95% CI of the key figures (see SpreadOf). One round
// is just SummarizeScale.
func SummarizeRounds(rounds [][]results.Request, opts ScaleOptions) results.Summary {
	opts.Round = 0
	if len(rounds) == 1 {
		return SummarizeScale(rounds[0], opts)
	}
	var pooled []results.Request
	perRound := make([]results.Summary, len(rounds))
	for i, reqs := range rounds {
		ro := opts
		ro.Round = i + 1
		perRound[i] = SummarizeScale(reqs, ro)
		pooled = append(pooled, reqs...)
	}
	agg := SummarizeScale(pooled, opts)
	agg.DurationS = 0
	var reasons []string
	for _, r := range perRound {
		agg.DurationS += r.DurationS
		if !r.Valid {
			reasons = append(reasons, "round "+strconv.Itoa(r.Round)+": "+r.InvalidReason)
		}
	}
	agg.ReqPerS = float64(agg.NumSuccess) / agg.DurationS
	agg.TokPerS = float64(agg.TotalOutputTokens) / agg.DurationS
	if opts.SLO != nil {
		agg.GoodputReqPerS = ptr(float64(countGood(pooled, opts.SLO)) / agg.DurationS)
	}
	if len(reasons) > 0 {
		agg.Valid = false
		agg.InvalidReason = strings.Join(reasons, "; ")
	}
	agg.Rounds = perRound
	agg.Spread = roundSpread(perRound)
	return agg
}

// spreadFigures are the figures whose across-round spread is reported,
// keyed as "<summary field>.<statistic>".
var spreadFigures = func() map[string]func(*results.Summary) *float64 {
	figs := map[string]func(*results.Summary) *float64{
		"req_per_s":         func(s *results.Summary) *float64 { return ptr(s.ReqPerS) },
		"tok_per_s":         func(s *results.Summary) *float64 { return ptr(s.TokPerS) },
		"success_rate":      func(s *results.Summary) *float64 { return ptr(s.SuccessRate) },
		"goodput_req_per_s": func(s *results.Summary) *float64 { return s.GoodputReqPerS },
		"send_lag_ms.p99":   func(s *results.Summary) *float64 { return s.SendLagMs.P99 },
	}
	stats := map[string]func(*results.Summary) *results.Stats{
		"ttft_ms": func(s *results.Summary) *results.Stats { return &s.TTFTMs },
		"tpot_ms": func(s *results.Summary) *results.Stats { return &s.TPOTMs },
		"itl_ms":  func(s *results.Summary) *results.Stats { return &s.ITLMs },
		"e2e_ms":  func(s *results.Summary) *results.Stats { return &s.E2EMs },
	}
	for name, get := range stats {
		figs[name+".mean"] = func(s *results.Summary) *float64 { return get(s).Mean }
		figs[name+".p50"] = func(s *results.Summary) *float64 { return get(s).P50 }
		figs[name+".p90"] = func(s *results.Summary) *float64 { return get(s).P90 }
		figs[name+".p99"] = func(s *results.Summary) *float64 { return get(s).P99 }
	}
	return figs
}()

func roundSpread(rounds []results.Summary) map[string]results.Spread {
	out := map[string]results.Spread{}
	for key, get := range spreadFigures {
		var values []float64
		for i := range rounds {
			if v := get(&rounds[i]); v != nil {
				values = append(values, *v)
			}
		}
		if len(values) > 0 {
			out[key] = SpreadOf(values)
		}
	}
	return out
}

// SpreadOf is the across-rounds variation of one figure: the mean of the
// per-round values and its 95% confidence interval from Student's t,
// mean ± t_{0.975, M−1} · s / √M, with s the sample standard deviation
// (M − 1 in the denominator). The interval is null with fewer than two
// values; everything is null with none.
func SpreadOf(values []float64) results.Spread {
	m := len(values)
	sp := results.Spread{Rounds: m}
	if m == 0 {
		return sp
	}
	mu := mean(values)
	sp.Mean = ptr(mu)
	if m < 2 {
		return sp
	}
	ss := 0.0
	for _, v := range values {
		ss += (v - mu) * (v - mu)
	}
	half := TCritical95(m-1) * math.Sqrt(ss/float64(m-1)) / math.Sqrt(float64(m))
	sp.CILow, sp.CIHigh = ptr(mu-half), ptr(mu+half)
	return sp
}
