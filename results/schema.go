// Package results owns the files a benchmark run leaves behind:
// online_results.json, offline_results.json and profile_manifest.json in the
// original harness's schema (keys added, none renamed): their types, reading
// (ours and the original's files), atomic writing, merging, and the backend
// labels' display names. It imports nothing from harness/, engine/ or
// plots/: everything after a run (harness/report, plots) reads these types
// from files.
//
// Units: seconds in JSON (the original's *_s keys), milliseconds in the
// *_ms summary objects and in tables. A value that cannot be computed is
// null, never NaN.
package results

// Stats is the five-number summary of one metric over one scale, in ms.
// Nil fields are JSON null (empty sample set).
type Stats struct {
	Mean *float64 `json:"mean"`
	P50  *float64 `json:"p50"`
	P90  *float64 `json:"p90"`
	P99  *float64 `json:"p99"`
	Max  *float64 `json:"max"`
	N    int      `json:"n"` // added: number of samples
}

// Spread is the across-rounds variation of one figure with --repeat M:
// mean of the per-round values and its 95% confidence interval (Student t).
type Spread struct {
	Mean   *float64 `json:"mean"`
	CILow  *float64 `json:"ci95_low"`
	CIHigh *float64 `json:"ci95_high"`
	Rounds int      `json:"rounds"`
}

// Summary is one (backend label, scale) of an online run. The first block of
// fields is the original's; the rest are additions.
type Summary struct {
	Backend           string  `json:"backend"`
	Scale             float64 `json:"scale"`
	NumRequests       int     `json:"num_requests"`
	NumSuccess        int     `json:"num_success"`
	NumError          int     `json:"num_error"`
	SuccessRate       float64 `json:"success_rate"`
	TotalOutputEvents int     `json:"total_output_events"` // token-carrying chunks
	DurationS         float64 `json:"duration_s"`
	ReqPerS           float64 `json:"req_per_s"`
	TokPerS           float64 `json:"tok_per_s"` // output tokens (not events) per second
	TTFTMs            Stats   `json:"ttft_ms"`
	E2EMs             Stats   `json:"e2e_ms"`
	TPOTMs            Stats   `json:"tpot_ms"`
	ITLMs             Stats   `json:"itl_ms"` // per-token ITL (docs/METRICS.md)

	TotalOutputTokens      int                `json:"total_output_tokens"`
	ICLMs                  Stats              `json:"icl_ms"`                 // inter-chunk latency
	TTFTScheduledMs        Stats              `json:"ttft_from_scheduled_ms"` // a_1 - t_s, includes client lag
	SendLagMs              Stats              `json:"send_lag_ms"`
	ErrorsByKind           map[string]int     `json:"errors_by_kind"`
	NumRetries             int                `json:"num_retries"`       // requests re-sent once on a new connection
	GoodputReqPerS         *float64           `json:"goodput_req_per_s"` // null without --slo
	SLOAttainment          *float64           `json:"slo_attainment"`    // share of requests meeting every SLO; null without --slo
	SLO                    map[string]float64 `json:"slo,omitempty"`     // metric -> threshold ms
	Valid                  bool               `json:"valid"`
	InvalidReason          string             `json:"invalid_reason,omitempty"`    // e.g. send lag p99 over threshold
	ServerQueueMs          *Stats             `json:"server_queue_ms,omitempty"`   // from return_server_timing
	ServerComputeMs        *Stats             `json:"server_prefill_ms,omitempty"` // first scheduled -> first token
	NetworkMs              *Stats             `json:"network_ms,omitempty"`        // TTFT - server TTFT
	ITLClientMinusServerMs *Stats             `json:"itl_client_minus_server_ms,omitempty"`
	Round                  int                `json:"round"`            // 0 for the aggregate; 1..M per round
	Rounds                 []Summary          `json:"rounds,omitempty"` // per-round summaries with --repeat
	Spread                 map[string]Spread  `json:"spread,omitempty"` // e.g. "ttft_ms.p99" across rounds
	// PrefixCache compares the server's prefix-cache hits with those the
	// workload implies; absent when no request carried either count.
	PrefixCache *PrefixCache `json:"prefix_cache,omitempty"`

	// ITLOutliers: with bench online --timeline.
	ITLOutliers *ITLOutliers `json:"itl_outliers,omitempty"`
}

// PrefixCache is a scale's prefix-cache summary over its successful
// requests (docs/METRICS.md "Prefix cache").
type PrefixCache struct {
	NumRequests      int      `json:"num_requests"`             // successful requests counted
	NumSessionTurns  int      `json:"num_session_turns"`        // of them, later turns of a session (turn >= 2)
	NumReported      int      `json:"num_reported"`             // of them, with the server's cached_tokens
	PromptTokens     int64    `json:"prompt_tokens"`            // Σ input_len
	ImpliedTokens    int64    `json:"implied_tokens"`           // Σ prefix_implied_tokens
	CachedTokens     *int64   `json:"cached_tokens"`            // Σ usage_cached_tokens; null when none was reported
	CachedOfImplied  *int64   `json:"cached_of_implied_tokens"` // Σ min(cached, implied)
	ImpliedHitRate   *float64 `json:"implied_hit_rate"`         // implied / prompt
	MeasuredHitRate  *float64 `json:"measured_hit_rate"`        // cached / prompt
	ImpliedHitsFound *float64 `json:"implied_hits_found"`       // Σ min(cached, implied) / implied
}

// ServerTiming is what roseinfer returns with return_server_timing, in
// seconds relative to the request's arrival at the server.
type ServerTiming struct {
	QueuedS         float64   `json:"queued_s"`
	FirstScheduledS float64   `json:"first_scheduled_s"`
	TokenS          []float64 `json:"token_s"`
	FinishedS       float64   `json:"finished_s"`
}

// Request is the raw per-request record every statistic is computed from.
// Times are seconds; start_s/end_s are relative to the round's replay start.
type Request struct {
	InputLen        int      `json:"input_len"`
	OutputLen       int      `json:"output_len"` // requested max_tokens
	StartS          float64  `json:"start_s"`    // t_0: first byte written
	EndS            float64  `json:"end_s"`      // stream ended
	TTFTS           *float64 `json:"ttft_s"`
	E2ES            *float64 `json:"e2e_s"`
	TPOTS           *float64 `json:"tpot_s"`
	NumStreamEvents int      `json:"num_stream_events"` // token-carrying chunks
	Error           *string  `json:"error"`

	Index                 int           `json:"index"`        // trace row
	ScheduledS            float64       `json:"scheduled_s"`  // t_s
	ChunkS                []float64     `json:"chunk_s"`      // arrival of each token-carrying chunk, relative to start_s
	ChunkTokens           []int         `json:"chunk_tokens"` // tokens carried by each of those chunks
	NumOutputTokens       int           `json:"num_output_tokens"`
	ErrorKind             string        `json:"error_kind,omitempty"` // http_4xx, http_5xx, connect, timeout, stream_broken, server_error
	HTTPStatus            int           `json:"http_status,omitempty"`
	UsagePromptTokens     *int          `json:"usage_prompt_tokens,omitempty"`
	UsageCompletionTokens *int          `json:"usage_completion_tokens,omitempty"`
	ServerTiming          *ServerTiming `json:"server_timing,omitempty"`
	// TokenCountSource says how chunk_tokens were known: token_ids,
	// continuous_usage, server_total (exact); tokenizer, chunks (approximate).
	TokenCountSource string `json:"token_count_source,omitempty"`
	// Retries is 1 when the client sent the request a second time, on a new
	// connection, because the first attempt never reached the server (a
	// pooled connection the server had just closed). start_s stays the
	// first attempt's send time.
	Retries int `json:"retries,omitempty"`
	// UsageCachedTokens is the server's usage.prompt_tokens_details.cached_tokens:
	// prompt tokens its prefix cache supplied (absent when it did not say).
	UsageCachedTokens *int `json:"usage_cached_tokens,omitempty"`
	// PrefixImpliedTokens is how many leading prompt tokens the workload
	// says repeat what the server saw before: a later turn's history (the
	// previous prompt and answer), or a first prompt's longest prefix shared
	// with an earlier one (docs/METRICS.md "Prefix cache").
	PrefixImpliedTokens *int `json:"prefix_implied_tokens,omitempty"`
	// Turn is the request's 1-based turn in its session, ParentIndex the
	// trace row of the turn it continues; both absent outside sessions.
	Turn        int  `json:"turn,omitempty"`
	ParentIndex *int `json:"parent_index,omitempty"`
}

// Run is one scale (and round) of one backend.
type Run struct {
	Scale          float64   `json:"scale"`
	Round          int       `json:"round"`
	Summary        Summary   `json:"summary"`
	RequestMetrics []Request `json:"request_metrics"`

	// Timeline: with bench online --timeline.
	Timeline *RoundTimeline `json:"timeline,omitempty"`
}

// BackendTiming is the wall-clock bookkeeping of one backend.
type BackendTiming struct {
	BackendStartTime string             `json:"backend_start_time"`
	BackendEndTime   string             `json:"backend_end_time"`
	ServerReadyS     float64            `json:"server_ready_s"`
	WarmupS          float64            `json:"warmup_s"`
	ScaleWallS       map[string]float64 `json:"scale_wall_s"`
	BackendWallS     float64            `json:"backend_wall_s"`
}

// Backend is everything recorded about one run spec (label).
type Backend struct {
	Backend string            `json:"backend"`
	BaseURL string            `json:"base_url"`
	Cmd     []string          `json:"cmd"`
	Env     map[string]string `json:"env,omitempty"` // overrides only
	Python  string            `json:"python,omitempty"`
	LogPath string            `json:"log_path"`
	Runs    []Run             `json:"runs"`
	Timing  BackendTiming     `json:"timing"`
	Error   string            `json:"error,omitempty"` // failed to start, died mid-run, skipped
	Skipped bool              `json:"skipped,omitempty"`
	FixHint string            `json:"fix_hint,omitempty"` // e.g. "run: bench envs setup vllm"
}

// Online is online_results.json.
type Online struct {
	Meta      map[string]any      `json:"meta"`
	Summaries []Summary           `json:"summaries"`
	ByBackend map[string]*Backend `json:"by_backend"`
}

// OfflineResult is one backend of offline_results.json.
type OfflineResult struct {
	Backend              string            `json:"backend"`
	Model                string            `json:"model"`
	Device               string            `json:"device"`
	NumPrompts           int               `json:"num_prompts"`
	InputLen             int               `json:"input_len"`
	OutputLen            int               `json:"output_len"`
	TotalInputTokens     int               `json:"total_input_tokens"`
	TotalOutputTokens    int               `json:"total_output_tokens"`
	PrefillS             *float64          `json:"prefill_s"`
	DecodeS              *float64          `json:"decode_s"`
	TotalS               float64           `json:"total_s"`
	RequestThroughputRPS float64           `json:"request_throughput_rps"`
	OutputThroughputTPS  float64           `json:"output_throughput_tps"`
	TotalThroughputTPS   float64           `json:"total_throughput_tps"`
	Extra                map[string]any    `json:"extra"` // error, exit_code, cmd, python, ...
	Round                int               `json:"round,omitempty"`
	Rounds               []OfflineResult   `json:"rounds,omitempty"`
	Spread               map[string]Spread `json:"spread,omitempty"`
}

// Offline is offline_results.json.
type Offline struct {
	Meta    map[string]any  `json:"meta"`
	Results []OfflineResult `json:"results"`
}

// Meta keys both run kinds write. Meta is a map, not a struct, so files of
// the original harness (whose keys differ by run kind and version, e.g. its
// roseinfer_mp_* keys) load unchanged.
const (
	MetaModel    = "model"
	MetaDevice   = "device"
	MetaScales   = "scales"
	MetaBackends = "backends"
	MetaVersions = "versions"
)
