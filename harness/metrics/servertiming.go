package metrics

import "github.com/roseinfer/roseinfer/results"

// Server timing (roseinfer's return_server_timing) gives, per request, the
// server's own instants in seconds after the request reached its HTTP
// handler: queued_s (handed to the engine), first_scheduled_s (first engine
// step with it), token_s (each generated token). With them a client TTFT
// splits into three parts that add up to it exactly:
//
//	queue   = first_scheduled_s              arrival → first scheduled (parsing, tokenizing, waiting)
//	compute = token_s[0] − first_scheduled_s first scheduled → first token (prefill)
//	network = TTFT − token_s[0]              the rest: request and response transfer, client overhead

// TTFTSplit returns the network, queue and compute parts of a request's TTFT
// in seconds (see above). ok is false without server timing, without a
// first token on either side, or when the record's chunks are inconsistent.
func TTFTSplit(r *results.Request) (network, queue, compute float64, ok bool) {
	st := r.ServerTiming
	ttft, defined := TTFT(r)
	if st == nil || !defined || len(st.TokenS) == 0 {
		return 0, 0, 0, false
	}
	return ttft - st.TokenS[0], st.FirstScheduledS, st.TokenS[0] - st.FirstScheduledS, true
}

// ITLClientMinusServer returns, per token, the client's per-token ITL minus
// the server's gap between emitting that token and the one before it
// (token_s[i] − token_s[i−1]). Tokens are matched by position, over the
// tokens that have a client ITL sample (all but the first chunk's); nil when
// the server reported a different number of tokens than the client counted.
// Positive values are delay added between the engine and the client.
func ITLClientMinusServer(r *results.Request) []float64 {
	st := r.ServerTiming
	at, k, ok := tokenEvents(r)
	n, _ := OutputTokens(r)
	if st == nil || !ok || len(at) < 2 || len(st.TokenS) != n {
		return nil
	}
	var diffs []float64
	token := k[0] // index of the first token of chunk j
	for j := 1; j < len(at); j++ {
		clientGap := (at[j] - at[j-1]) / float64(k[j])
		for range k[j] {
			diffs = append(diffs, clientGap-(st.TokenS[token]-st.TokenS[token-1]))
			token++
		}
	}
	return diffs
}

// addServerTiming fills the server-timing statistics of a summary, in ms,
// from its successful requests; they stay nil when no request carries
// server timing.
func addServerTiming(s *results.Summary, reqs []results.Request) {
	var network, queue, compute, itlDiff []float64
	for i := range reqs {
		r := &reqs[i]
		if !Succeeded(r) {
			continue
		}
		if n, q, c, ok := TTFTSplit(r); ok {
			network = append(network, n*1000)
			queue = append(queue, q*1000)
			compute = append(compute, c*1000)
		}
		itlDiff = appendMs(itlDiff, ITLClientMinusServer(r))
	}
	if len(network) > 0 {
		s.NetworkMs, s.ServerQueueMs, s.ServerComputeMs = statsPtr(network), statsPtr(queue), statsPtr(compute)
	}
	if len(itlDiff) > 0 {
		s.ITLClientMinusServerMs = statsPtr(itlDiff)
	}
}

func statsPtr(samples []float64) *results.Stats {
	st := Summarize(samples)
	return &st
}
