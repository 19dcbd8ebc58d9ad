package results

// ITLOutliers counts a summary's ITL outliers, token chunks whose per-token
// ITL exceeds their round's ITL p99 (docs/METRICS.md), by the cause the
// timeline found in the server's engine steps (docs/TIMELINE.md).
type ITLOutliers struct {
	ThresholdMs *float64       `json:"threshold_ms"` // the round's ITL p99; null in an aggregate of rounds
	N           int            `json:"n"`            // outlier chunks
	ByCause     map[string]int `json:"by_cause"`     // cause -> outlier chunks; the counts add up to n
}

// RoundTimeline places a round's server trace on the client's clock (bench
// online --timeline). Seconds on the client's clock, from the round's start
// (the origin of start_s).
type RoundTimeline struct {
	StartUnixNs int64 `json:"start_unix_ns"` // the round's start, CLOCK_REALTIME
	// ServerTrace is the server's Chrome trace of the round's engine steps,
	// relative to the run directory when inside it; "" when there is none
	// and ServerNote says why.
	ServerTrace string `json:"server_trace,omitempty"`
	ServerNote  string `json:"server_note,omitempty"`
	// ServerOriginS is where the trace's time zero falls on the client's
	// clock; Clock says how that was found ("shared_realtime",
	// "round_trip_midpoint") and ClockErrorS bounds its error.
	ServerOriginS *float64 `json:"server_origin_s,omitempty"`
	Clock         string   `json:"clock,omitempty"`
	ClockErrorS   *float64 `json:"clock_error_s,omitempty"`
}
