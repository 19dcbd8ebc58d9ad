package timeline

import (
	"fmt"
	"sort"
	"strings"

	"github.com/roseinfer/roseinfer/harness/metrics"
	"github.com/roseinfer/roseinfer/results"
)

// Causes of an ITL outlier, as the summary counts them.
const (
	// CausePrefillInStep: one step covers most of the gap and it ran
	// prompt tokens beside its decode rows: a prefill chunk in the same
	// step delayed the token.
	CausePrefillInStep = "prefill_in_step"
	// CausePrefillStep: one prefill-only step covers most of the gap: the
	// stream's sequence waited while it ran.
	CausePrefillStep = "prefill_step"
	// CauseDecodeStep: one decode-only step covers most of the gap (a
	// large batch, a graph capture, a device stall).
	CauseDecodeStep = "decode_step"
	// CauseSeveralSteps: the engine was busy for most of the gap but no
	// single step covers half of it (the sequence sat out steps:
	// preempted, or waiting behind the token budget).
	CauseSeveralSteps = "several_steps"
	// CauseEngineIdle: the engine ran no step for most of the gap.
	CauseEngineIdle = "engine_idle"
	// CauseDelivery: by the server's own timing (return_server_timing)
	// the token left the engine less than half the gap after the previous
	// one: the time went to streaming it (the server's HTTP layer, the
	// network, the client), whatever steps ran meanwhile.
	CauseDelivery = "delivery"
	// CauseNoServerTrace: no engine steps cover the gap (a server that is
	// not roseinfer, a failed capture, or a truncated trace).
	CauseNoServerTrace = "no_server_trace"
)

// Causes lists every cause in the order tables show them.
var Causes = []string{CausePrefillInStep, CausePrefillStep, CauseDecodeStep, CauseSeveralSteps, CauseEngineIdle,
	CauseDelivery, CauseNoServerTrace}

// Attribution is one ITL outlier and the engine step it fell in.
type Attribution struct {
	Request int // index into the round's requests
	metrics.ITLOutlier
	GapStartS, GapEndS float64 // the gap on the round's clock
	Cause              string
	// ServerGapS is the same gap by the server's timing (its emission of
	// this chunk's last token minus the previous chunk's); nil without
	// server timing, or when it counts other tokens than the client.
	ServerGapS *float64
	Step       *Step   // the step covering most of the gap; nil for engine_idle, delivery and no_server_trace
	OverlapS   float64 // how much of the gap Step covers
	Why        string  // one line for a person
}

// Steps are a round's engine steps on the round's clock, sorted by end,
// and the span of that clock the server's trace covers.
type Steps struct {
	Steps              []Step
	CoverFromS, CoverS float64 // no step outside [CoverFromS, CoverS] is known
}

// OnClock returns tr's steps on a round's clock. A truncated trace covers
// only up to its last step's end.
func OnClock(tr *ServerTrace, c Clock) *Steps {
	s := &Steps{Steps: make([]Step, len(tr.Steps)), CoverFromS: c.OriginS, CoverS: c.OriginS + tr.DurationS}
	for i, st := range tr.Steps {
		st.StartS += c.OriginS
		st.EndS += c.OriginS
		s.Steps[i] = st
	}
	if tr.Truncated {
		s.CoverS = s.CoverFromS
		if n := len(s.Steps); n > 0 {
			s.CoverS = s.Steps[n-1].EndS
		}
	}
	return s
}

// Attribute finds the ITL outliers of a round's requests (per-token ITL
// above itl.P99, the round's ITL p99; metrics.ITLOutliers) and attributes
// each to what made it long. steps is nil when the round has no server
// trace. Nil when the round has no ITL sample.
//
// A gap runs from the previous token chunk's arrival to this one's. Two
// things can stretch it: the engine (its steps between the two tokens)
// and delivery (the server's HTTP layer, the network, the client). A
// request with server timing (return_server_timing) splits the two: the
// server's own gap between emitting the two tokens is the engine's part,
// the rest is delivery. Per token, whichever part lies further above
// normal (delivery: above zero; the engine: above the round's ITL p50)
// is the cause; a token that waited in the server's stream and came in a
// chunk with others is a delivery outlier.
//
// The engine's part is then matched to steps. The step that made the token
// ended a little before the token arrived and began a little before the
// previous token arrived, so it covers the gap but for the delivery time:
// the step with the largest overlap, if it covers at least half of the
// engine's part, is the one the outlier fell in. Delivery times up to half
// the gap cannot move an outlier to the wrong step.
func Attribute(reqs []results.Request, itl results.Stats, steps *Steps) []Attribution {
	if itl.P99 == nil {
		return nil
	}
	typicalS := 0.0
	if itl.P50 != nil {
		typicalS = *itl.P50 / 1e3
	}
	var out []Attribution
	for i := range reqs {
		r := &reqs[i]
		var lastToken []int // by chunk: index of its last token among the request's tokens
		for _, o := range metrics.ITLOutliers(r, *itl.P99) {
			if lastToken == nil {
				lastToken = lastTokens(r)
			}
			a := Attribution{Request: i, ITLOutlier: o, GapStartS: r.StartS + r.ChunkS[o.Prev],
				GapEndS: r.StartS + r.ChunkS[o.Chunk]}
			if st := r.ServerTiming; st != nil && len(st.TokenS) == lastToken[len(lastToken)-1]+1 {
				g := st.TokenS[lastToken[o.Chunk]] - st.TokenS[lastToken[o.Prev]]
				a.ServerGapS = &g
			}
			attributeGap(&a, r.ChunkTokens[o.Chunk], typicalS, steps)
			out = append(out, a)
		}
	}
	return out
}

// lastTokens maps each chunk of r to the index of its last token.
func lastTokens(r *results.Request) []int {
	idx := make([]int, len(r.ChunkTokens))
	n := 0
	for j, k := range r.ChunkTokens {
		n += max(k, 0)
		idx[j] = n - 1
	}
	return idx
}

// attributeGap sets a's cause: numTokens is what the chunk carried,
// typicalS the round's ITL p50.
func attributeGap(a *Attribution, numTokens int, typicalS float64, s *Steps) {
	g0, g1 := a.GapStartS, a.GapEndS
	gap := g1 - g0
	engineS := gap // the engine's part of the gap
	if sg := a.ServerGapS; sg != nil {
		k := float64(numTokens)
		if (gap-*sg)/k > *sg/k-typicalS {
			a.Cause = CauseDelivery
			a.Why = fmt.Sprintf("the server emitted the %s %.2f ms after the previous chunk's (%.2f ms a token); "+
				"the other %.2f ms were spent between the engine and the client", tokensWord(numTokens), *sg*1e3,
				*sg/k*1e3, (gap-*sg)*1e3)
			return
		}
		engineS = *sg
	}
	if s == nil || g0 < s.CoverFromS || g1 > s.CoverS {
		a.Cause, a.Why = CauseNoServerTrace, "no engine steps recorded for this gap"
		return
	}
	// Steps are sorted by end and do not overlap, so they are sorted by
	// start too: scan from the first that ends after the gap begins.
	var best *Step
	bestS, busyS, n := 0.0, 0.0, 0
	for k := sort.Search(len(s.Steps), func(k int) bool { return s.Steps[k].EndS > g0 }); k < len(s.Steps); k++ {
		st := &s.Steps[k]
		if st.StartS >= g1 {
			break
		}
		ov := min(st.EndS, g1) - max(st.StartS, g0)
		busyS += ov
		n++
		if ov > bestS {
			best, bestS = st, ov
		}
	}
	switch {
	case best != nil && bestS >= engineS/2:
		step := *best
		a.Step, a.OverlapS = &step, bestS
		a.Cause, a.Why = stepCause(&step)
	case busyS >= engineS/2:
		step := *best
		a.Step, a.OverlapS = &step, bestS
		a.Cause = CauseSeveralSteps
		a.Why = fmt.Sprintf("%d steps ran in the gap, none for half of it (longest: step %d, %s)", n, step.Num, describe(&step))
	default:
		a.Cause = CauseEngineIdle
		a.Why = fmt.Sprintf("the engine ran steps for %.2f of the gap's %.2f ms", busyS*1e3, gap*1e3)
	}
}

func tokensWord(n int) string {
	if n == 1 {
		return "token"
	}
	return fmt.Sprintf("chunk's %d tokens", n)
}

// stepCause names what made step st long.
func stepCause(st *Step) (cause, why string) {
	switch st.Kind() {
	case "mixed":
		what := "prefill chunk"
		if n := st.NumSeqs - st.DecodeRows; n > 1 {
			what = fmt.Sprintf("prefill chunks of %d sequences", n)
		}
		return CausePrefillInStep, fmt.Sprintf("%s of %d tokens in the same step (step %d, %s)", what,
			st.PrefillTokens, st.Num, describe(st))
	case "prefill":
		return CausePrefillStep, fmt.Sprintf("prefill-only step of %d tokens (step %d, %s)", st.PrefillTokens, st.Num,
			describe(st))
	}
	return CauseDecodeStep, fmt.Sprintf("decode step of %d rows (step %d, %s)", st.DecodeRows, st.Num, describe(st))
}

// describe is a step's shape and length: "5 seqs, 256 prefill tokens,
// 4 decode rows, 27.61 ms, eager".
func describe(st *Step) string {
	s := fmt.Sprintf("%d seqs, %d prefill tokens, %d decode rows, %.2f ms", st.NumSeqs, st.PrefillTokens,
		st.DecodeRows, (st.EndS-st.StartS)*1e3)
	if st.Exec != "" {
		s += ", " + st.Exec
	}
	return s
}

// Count is the summary of a round's attributions; threshold is the
// round's ITL p99 (nil: no ITL sample, hence no outlier).
func Count(atts []Attribution, threshold *float64) *results.ITLOutliers {
	c := &results.ITLOutliers{ThresholdMs: threshold, N: len(atts), ByCause: map[string]int{}}
	for _, a := range atts {
		c.ByCause[a.Cause]++
	}
	return c
}

// Sum adds the rounds' counts for a scale's aggregate. Its threshold is
// null unless there is one round (each round used its own p99). Nil when
// no round has counts.
func Sum(rounds []*results.ITLOutliers) *results.ITLOutliers {
	if len(rounds) == 1 {
		return rounds[0]
	}
	var sum *results.ITLOutliers
	for _, r := range rounds {
		if r == nil {
			continue
		}
		if sum == nil {
			sum = &results.ITLOutliers{ByCause: map[string]int{}}
		}
		sum.N += r.N
		for k, v := range r.ByCause {
			sum.ByCause[k] += v
		}
	}
	return sum
}

// Line is the console's line for one round: how many ITL outliers, their
// causes, and how the server's clock was aligned (or why there are no
// server steps).
func Line(label, scale string, round int, c *results.ITLOutliers, rt *results.RoundTimeline) string {
	if c == nil || rt == nil {
		return ""
	}
	line := fmt.Sprintf("[%s scale=%s round=%d] timeline: %d ITL outliers", label, scale, round, c.N)
	if c.ThresholdMs != nil {
		line += fmt.Sprintf(" above p99 %.2f ms", *c.ThresholdMs)
	}
	if causes := CauseList(c.ByCause); causes != "" {
		line += " (" + causes + ")"
	}
	switch {
	case rt.ServerNote != "":
		line += "; no server steps: " + rt.ServerNote
	case rt.ClockErrorS != nil:
		line += fmt.Sprintf("; server clock %s, within %.1f µs", rt.Clock, *rt.ClockErrorS*1e6)
	}
	return line
}

// CauseList is "prefill_in_step 12, decode_step 2", causes in Causes'
// order, zero counts left out.
func CauseList(byCause map[string]int) string {
	var parts []string
	for _, c := range Causes {
		if n := byCause[c]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", c, n))
		}
	}
	return strings.Join(parts, ", ")
}
