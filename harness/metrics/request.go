package metrics

import "github.com/roseinfer/roseinfer/results"

// Per-request figures, in seconds. A record's chunk arrivals ChunkS are
// relative to its send time t_0 (StartS); StartS, EndS and ScheduledS are
// relative to the round's replay start.

// Succeeded says whether a request counts as a success, docs/METRICS.md: "A
// request is an error if the HTTP status is not 200, the stream breaks, or
// the server reports an error; its timings are kept in the per-request record
// but excluded from latency statistics." The client records any of those in
// Error.
func Succeeded(r *results.Request) bool { return r.Error == nil }

// maxChunkTokens bounds one chunk's token count. No server sends a million
// tokens in one chunk; a record claiming so is corrupt, and trusting it
// would make ITL allocate one sample per claimed token.
const maxChunkTokens = 1 << 20

// tokenEvents returns the token-carrying chunks of r: arrival a_j (seconds
// after t_0) and token count k_j. docs/METRICS.md: "Chunks with no generated
// tokens (usage-only, finish-only) are not token events", so entries with
// k_j < 1 are skipped. ok is false when the record's ChunkS and ChunkTokens
// disagree in length or a count is absurd: its token counts cannot be
// trusted, so every chunk-based figure is undefined rather than guessed
// ("never assume one token per chunk").
func tokenEvents(r *results.Request) (at []float64, k []int, ok bool) {
	if len(r.ChunkS) != len(r.ChunkTokens) {
		return nil, nil, false
	}
	for j, n := range r.ChunkTokens {
		if n > maxChunkTokens {
			return nil, nil, false
		}
		if n >= 1 {
			at = append(at, r.ChunkS[j])
			k = append(k, n)
		}
	}
	return at, k, true
}

// OutputTokens is N, docs/METRICS.md: "N = Σ k_j" over token-carrying chunks.
// ok is false when the record's chunk arrays are inconsistent.
func OutputTokens(r *results.Request) (n int, ok bool) {
	_, k, ok := tokenEvents(r)
	for _, v := range k {
		n += v
	}
	return n, ok
}

// TTFT is the time to first token, docs/METRICS.md: "TTFT = a_1 − t_0".
// Undefined without a token-carrying chunk.
func TTFT(r *results.Request) (float64, bool) {
	at, _, ok := tokenEvents(r)
	if !ok || len(at) == 0 {
		return 0, false
	}
	return at[0], true
}

// TTFTFromScheduled is docs/METRICS.md's "TTFT from scheduled time, a_1 − t_s,
// which includes client lag": TTFT plus the send lag.
func TTFTFromScheduled(r *results.Request) (float64, bool) {
	ttft, ok := TTFT(r)
	if !ok {
		return 0, false
	}
	return (r.StartS + ttft) - r.ScheduledS, true
}

// SendLag is docs/METRICS.md's "Send lag = t_0 − t_s": how late the client wrote
// the request's first byte relative to the schedule.
func SendLag(r *results.Request) float64 { return r.StartS - r.ScheduledS }

// E2E is docs/METRICS.md's "E2E = time the stream ended ([DONE] or connection
// close) − t_0".
func E2E(r *results.Request) float64 { return r.EndS - r.StartS }

// TPOT is the time per output token, docs/METRICS.md: "TPOT = (a_m − a_1) /
// (N − 1), defined when N ≥ 2." With several tokens in one chunk the
// numerator counts chunk arrivals and the denominator tokens, so a stream
// of 4-token chunks 40 ms apart has TPOT 10 ms.
func TPOT(r *results.Request) (float64, bool) {
	at, _, ok := tokenEvents(r)
	n, _ := OutputTokens(r)
	if !ok || n < 2 {
		return 0, false
	}
	return (at[len(at)-1] - at[0]) / float64(n-1), true
}

// ITL returns the per-token inter-token latencies of one request,
// docs/METRICS.md: "a chunk j > 1 carrying k_j tokens contributes k_j samples of
// (a_j − a_{j−1}) / k_j; the first chunk's extra tokens (k_1 − 1) contribute
// nothing." A summary pools these over all successful requests of a scale.
// Nil when the record's chunk arrays are inconsistent.
func ITL(r *results.Request) []float64 {
	at, k, ok := tokenEvents(r)
	if !ok || len(at) < 2 {
		return nil
	}
	var samples []float64
	for j := 1; j < len(at); j++ {
		gap := (at[j] - at[j-1]) / float64(k[j])
		for range k[j] {
			samples = append(samples, gap)
		}
	}
	return samples
}

// ICL returns the inter-chunk latencies of one request, docs/METRICS.md:
// "Inter-chunk latency (ICL): a_j − a_{j−1}, pooled; equals ITL when every
// chunk carries one token."
func ICL(r *results.Request) []float64 {
	at, _, ok := tokenEvents(r)
	if !ok || len(at) < 2 {
		return nil
	}
	samples := make([]float64, len(at)-1)
	for j := 1; j < len(at); j++ {
		samples[j-1] = at[j] - at[j-1]
	}
	return samples
}

// FillRequest writes the per-request figures into the record's own fields:
// ttft_s, e2e_s, tpot_s (null when undefined), num_stream_events (token-
// carrying chunks) and num_output_tokens (N). Errors get them too: their
// timings stay in the record even though summaries exclude them.
func FillRequest(r *results.Request) {
	at, _, _ := tokenEvents(r)
	r.NumStreamEvents = len(at)
	r.NumOutputTokens, _ = OutputTokens(r)
	r.TTFTS = optional(TTFT(r))
	r.TPOTS = optional(TPOT(r))
	r.E2ES = ptr(E2E(r))
}

func optional(v float64, ok bool) *float64 {
	if !ok {
		return nil
	}
	return &v
}
