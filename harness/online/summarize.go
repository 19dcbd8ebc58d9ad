package online

import (
	"github.com/roseinfer/roseinfer/harness/metrics"
	"github.com/roseinfer/roseinfer/results"
)

// The online runner computes no figure itself: these wrappers only adapt
// harness/metrics (the one home of every definition in docs/METRICS.md) to the
// run's settings.

type sloConfig = metrics.SLO

// parseSLO parses --slo; "" means no objectives (goodput null).
func parseSLO(s string) (sloConfig, error) {
	if s == "" {
		return nil, nil
	}
	return metrics.ParseSLO(s)
}

// fillRequests writes each record's per-request figures (TTFT, TPOT, E2E).
func fillRequests(reqs []results.Request) {
	for i := range reqs {
		metrics.FillRequest(&reqs[i])
	}
}

func scaleOptions(label string, scale float64, slo sloConfig, maxSendLagP99Ms float64) metrics.ScaleOptions {
	return metrics.ScaleOptions{Backend: label, Scale: scale, SLO: slo, MaxSendLagP99Ms: maxSendLagP99Ms}
}

// summarize is one round's summary.
func summarize(label string, scale float64, round int, reqs []results.Request, slo sloConfig, maxSendLagP99Ms float64) results.Summary {
	opts := scaleOptions(label, scale, slo, maxSendLagP99Ms)
	opts.Round = round
	return metrics.SummarizeScale(reqs, opts)
}

// aggregate is the scale's summary over its rounds (the round itself when
// there is one).
func aggregate(label string, scale float64, rounds [][]results.Request, slo sloConfig, maxSendLagP99Ms float64) results.Summary {
	return metrics.SummarizeRounds(rounds, scaleOptions(label, scale, slo, maxSendLagP99Ms))
}
