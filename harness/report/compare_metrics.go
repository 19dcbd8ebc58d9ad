package report

import (
	"math"
	"slices"
	"strings"

	"github.com/roseinfer/roseinfer/results"
)

// metricRef reads one figure from a summary or offline result: its value, and
// the key of its across-rounds spread.
type metricRef struct {
	name      string // canonical name, also the spread key
	spreadKey string
	online    func(*results.Summary) *float64
	offline   func(*results.OfflineResult) *float64
}

var statNames = []string{"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "icl_ms", "ttft_from_scheduled_ms", "send_lag_ms"}

func statsOf(s *results.Summary, name string) results.Stats {
	switch name {
	case "ttft_ms":
		return s.TTFTMs
	case "tpot_ms":
		return s.TPOTMs
	case "itl_ms":
		return s.ITLMs
	case "e2e_ms":
		return s.E2EMs
	case "icl_ms":
		return s.ICLMs
	case "ttft_from_scheduled_ms":
		return s.TTFTScheduledMs
	case "send_lag_ms":
		return s.SendLagMs
	}
	return results.Stats{}
}

func pick(st results.Stats, field string) *float64 {
	switch field {
	case "mean":
		return st.Mean
	case "p50":
		return st.P50
	case "p90":
		return st.P90
	case "p99":
		return st.P99
	case "max":
		return st.Max
	}
	return nil
}

func ptr(v float64) *float64 { return &v }

// onlineMetric resolves an online metric name: "<stat>.<mean|p50|p90|p99|max>"
// or a per-scale figure (tok_per_s alias output_tok_s, req_per_s alias req_s,
// success_rate, goodput_req_per_s).
func onlineMetric(name string) (metricRef, bool) {
	if stat, field, ok := strings.Cut(name, "."); ok {
		if !slices.Contains(statNames, stat) || pick(results.Stats{Mean: ptr(0), P50: ptr(0), P90: ptr(0), P99: ptr(0), Max: ptr(0)}, field) == nil {
			return metricRef{}, false
		}
		return metricRef{name: name, spreadKey: name, online: func(s *results.Summary) *float64 { return pick(statsOf(s, stat), field) }}, true
	}
	switch name {
	case "tok_per_s", "output_tok_s":
		return metricRef{name: "tok_per_s", spreadKey: "tok_per_s", online: func(s *results.Summary) *float64 { return ptr(s.TokPerS) }}, true
	case "req_per_s", "req_s":
		return metricRef{name: "req_per_s", spreadKey: "req_per_s", online: func(s *results.Summary) *float64 { return ptr(s.ReqPerS) }}, true
	case "success_rate":
		return metricRef{name: "success_rate", spreadKey: "success_rate", online: func(s *results.Summary) *float64 { return ptr(s.SuccessRate) }}, true
	case "goodput_req_per_s":
		return metricRef{name: "goodput_req_per_s", spreadKey: "goodput_req_per_s", online: func(s *results.Summary) *float64 { return s.GoodputReqPerS }}, true
	}
	return metricRef{}, false
}

// offlineMetric resolves an offline metric name (original keys or the short
// aliases output_tok_s, req_s, total_tok_s).
func offlineMetric(name string) (metricRef, bool) {
	switch name {
	case "output_throughput_tps", "output_tok_s", "tok_per_s":
		return metricRef{name: "output_throughput_tps", spreadKey: "output_throughput_tps", offline: func(r *results.OfflineResult) *float64 { return ptr(r.OutputThroughputTPS) }}, true
	case "request_throughput_rps", "req_s", "req_per_s":
		return metricRef{name: "request_throughput_rps", spreadKey: "request_throughput_rps", offline: func(r *results.OfflineResult) *float64 { return ptr(r.RequestThroughputRPS) }}, true
	case "total_throughput_tps", "total_tok_s":
		return metricRef{name: "total_throughput_tps", spreadKey: "total_throughput_tps", offline: func(r *results.OfflineResult) *float64 { return ptr(r.TotalThroughputTPS) }}, true
	case "total_s":
		return metricRef{name: "total_s", spreadKey: "total_s", offline: func(r *results.OfflineResult) *float64 { return ptr(r.TotalS) }}, true
	}
	return metricRef{}, false
}

// KnownCompareMetrics lists the names --fail-on accepts.
func KnownCompareMetrics() []string {
	var out []string
	for _, s := range statNames {
		out = append(out, s+".{mean,p50,p90,p99,max}")
	}
	return append(out, "tok_per_s|output_tok_s", "req_per_s|req_s", "success_rate", "goodput_req_per_s",
		"output_throughput_tps", "request_throughput_rps", "total_throughput_tps|total_tok_s", "total_s")
}

// Metrics shown for information when no rule names them.
var (
	defaultOnlineMetrics  = []string{"ttft_ms.p50", "ttft_ms.p90", "ttft_ms.p99", "tpot_ms.p90", "itl_ms.p90", "e2e_ms.p90", "tok_per_s", "req_per_s"}
	defaultOfflineMetrics = []string{"output_throughput_tps", "request_throughput_rps", "total_throughput_tps"}
)

// spreadCI is the across-rounds 95% CI of a metric, when there were at least
// two rounds (looked up by its canonical key, then by the name as written).
func spreadCI(spread map[string]results.Spread, keys ...string) *[2]float64 {
	for _, k := range keys {
		sp, ok := spread[k]
		if !ok || sp.Rounds < 2 {
			continue
		}
		lo, hi := finitePtr(sp.CILow), finitePtr(sp.CIHigh)
		if lo != nil && hi != nil {
			return &[2]float64{*lo, *hi}
		}
	}
	return nil
}

func finitePtr(v *float64) *float64 {
	if v == nil || math.IsNaN(*v) || math.IsInf(*v, 0) {
		return nil
	}
	return v
}
