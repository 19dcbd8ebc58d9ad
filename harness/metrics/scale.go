package metrics

import (
	"fmt"
	"math"

	"github.com/roseinfer/roseinfer/results"
)

// DefaultMaxSendLagP99Ms is the validity threshold on a scale's send lag
// p99: past it the client, not the server, shaped the load.
const DefaultMaxSendLagP99Ms = 5.0

// ScaleOptions say which (backend, scale, round) a summary is for and how
// to judge it.
type ScaleOptions struct {
	Backend string
	Scale   float64
	Round   int // 0 for a single run or an aggregate; 1..M for rounds
	SLO     SLO // nil: goodput is null
	// MaxSendLagP99Ms is the validity threshold; 0 means
	// DefaultMaxSendLagP99Ms and a negative value disables the rule.
	MaxSendLagP99Ms float64
}

// minDurationS is the original's floor on duration, so a rate never divides
// by zero.
const minDurationS = 1e-9

// Duration is a scale's measured time span, docs/METRICS.md: "duration = max(end)
// − min(send) over successful requests". With no success it spans all
// requests, as the original did; it is never below 1e-9 s.
func Duration(reqs []results.Request) float64 {
	span := func(keep func(*results.Request) bool) (float64, bool) {
		first, last, any := math.Inf(1), math.Inf(-1), false
		for i := range reqs {
			if r := &reqs[i]; keep(r) {
				first, last, any = math.Min(first, r.StartS), math.Max(last, r.EndS), true
			}
		}
		return last - first, any
	}
	d, ok := span(Succeeded)
	if !ok {
		d, ok = span(func(*results.Request) bool { return true })
	}
	if !ok || !(d > minDurationS) {
		return minDurationS
	}
	return d
}

// SummarizeScale computes one (backend, scale[, round]) summary from its
// raw records. Latency statistics come from successful requests only
// (TTFT, TTFT from scheduled, E2E and TPOT per request; ITL and ICL pooled);
// send lag covers every request sent, since it measures the client.
// req/s = successes / duration, tok/s = Σ N / duration, goodput = good
// requests / duration, SLO attainment = good requests / requests
// (docs/METRICS.md "Per scale").
func SummarizeScale(reqs []results.Request, opts ScaleOptions) results.Summary {
	s := results.Summary{
		Backend:      opts.Backend,
		Scale:        opts.Scale,
		Round:        opts.Round,
		NumRequests:  len(reqs),
		ErrorsByKind: map[string]int{},
		Valid:        true,
	}
	var ttft, ttftSched, e2e, tpot, itl, icl, sendLag []float64
	for i := range reqs {
		r := &reqs[i]
		sendLag = append(sendLag, SendLag(r)*1000)
		s.NumRetries += r.Retries
		if !Succeeded(r) {
			s.NumError++
			kind := r.ErrorKind
			if kind == "" {
				kind = "unknown"
			}
			s.ErrorsByKind[kind]++
			continue
		}
		s.NumSuccess++
		at, _, _ := tokenEvents(r)
		s.TotalOutputEvents += len(at)
		n, _ := OutputTokens(r)
		s.TotalOutputTokens += n
		if v, ok := TTFT(r); ok {
			ttft = append(ttft, v*1000)
		}
		if v, ok := TTFTFromScheduled(r); ok {
			ttftSched = append(ttftSched, v*1000)
		}
		e2e = append(e2e, E2E(r)*1000)
		if v, ok := TPOT(r); ok {
			tpot = append(tpot, v*1000)
		}
		itl = appendMs(itl, ITL(r))
		icl = appendMs(icl, ICL(r))
	}
	s.SuccessRate = float64(s.NumSuccess) / float64(max(s.NumRequests, 1))
	s.DurationS = Duration(reqs)
	s.ReqPerS = float64(s.NumSuccess) / s.DurationS
	s.TokPerS = float64(s.TotalOutputTokens) / s.DurationS
	if opts.SLO != nil {
		s.SLO = opts.SLO
		s.GoodputReqPerS = ptr(float64(countGood(reqs, opts.SLO)) / s.DurationS)
		s.SLOAttainment = ptr(opts.SLO.Attainment(reqs))
	}
	s.TTFTMs, s.TTFTScheduledMs, s.E2EMs = Summarize(ttft), Summarize(ttftSched), Summarize(e2e)
	s.TPOTMs, s.ITLMs, s.ICLMs = Summarize(tpot), Summarize(itl), Summarize(icl)
	s.SendLagMs = Summarize(sendLag)
	s.Valid, s.InvalidReason = Validity(s.SendLagMs, opts.MaxSendLagP99Ms)
	addServerTiming(&s, reqs)
	s.PrefixCache = PrefixCache(reqs)
	return s
}

// countGood counts the requests that meet every objective of slo.
func countGood(reqs []results.Request, slo SLO) int {
	n := 0
	for i := range reqs {
		if slo.Meets(&reqs[i]) {
			n++
		}
	}
	return n
}

// Validity is the replay-fidelity rule: a scale whose send lag p99 exceeds
// the threshold (ms; 0 means DefaultMaxSendLagP99Ms, negative disables) is
// invalid, because the client could not keep to the schedule and the load
// the server saw is not the load the trace describes.
func Validity(sendLagMs results.Stats, maxP99Ms float64) (valid bool, reason string) {
	if maxP99Ms == 0 {
		maxP99Ms = DefaultMaxSendLagP99Ms
	}
	if maxP99Ms < 0 || sendLagMs.P99 == nil || *sendLagMs.P99 <= maxP99Ms {
		return true, ""
	}
	return false, fmt.Sprintf("send lag p99 %.3f ms > %g ms: the client fell behind the schedule", *sendLagMs.P99, maxP99Ms)
}

func appendMs(dst, seconds []float64) []float64 {
	for _, v := range seconds {
		dst = append(dst, v*1000)
	}
	return dst
}
