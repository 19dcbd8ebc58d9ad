package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// CapacityFile is bench capacity's record in its run directory; the
// probes' raw requests are in online_results.json beside it, one scale per
// probed load.
const CapacityFile = "capacity.json"

// Capacity is capacity.json: what was asked and per backend every probe,
// the bracket and the answer. Meta holds the run's settings and context
// (mode, trace, n, search limits, versions, times).
type Capacity struct {
	SLO           map[string]float64 `json:"slo"`            // metric -> threshold ms
	GoodputTarget float64            `json:"goodput_target"` // least SLO attainment that passes
	Tolerance     float64            `json:"tolerance"`      // relative bracket width that ends a search
	Meta          map[string]any     `json:"meta"`
	Backends      []CapacityBackend  `json:"backends"` // in run order
}

// CapacityBackend is one backend's search. Loads are offered request rates
// in req/s; a rate r replays the trace at scale base_rate_req_s / r.
type CapacityBackend struct {
	Backend string `json:"backend"`
	// Mode is "scale" (the trace's own arrivals, time-scaled) or "rate"
	// (Poisson arrivals at the rate, --rate-mode).
	Mode         string          `json:"mode"`
	BaseRateReqS float64         `json:"base_rate_req_s"` // offered req/s at scale 1
	Probes       []CapacityProbe `json:"probes"`          // in the order run
	Bracket      CapacityBracket `json:"bracket"`
	// CapacityReqS is the answer: the highest rate that passed and was not
	// contradicted by a failure at or below it (bracket.lo_req_s); null
	// when none passed. CapacityScale is the same load as a trace scale.
	CapacityReqS  *float64 `json:"capacity_req_s"`
	CapacityScale *float64 `json:"capacity_scale"`
	// Converged: the bracket is within the tolerance and the answer passed
	// its confirmations. Otherwise Stop says why the search ended:
	// max_load (every rate up to --max-rate passed), min_load (none
	// passed), max_probes, error or interrupted.
	Converged bool   `json:"converged"`
	Stop      string `json:"stop"`
	// LimitedByClient: the bracket's upper end failed because the client
	// fell behind its schedule, not because of the SLO; the server may take
	// more than the answer says.
	LimitedByClient bool   `json:"limited_by_client"`
	Error           string `json:"error,omitempty"`
}

// CapacityBracket bounds the capacity: lo passed, hi failed (null: none).
type CapacityBracket struct {
	LoReqS *float64 `json:"lo_req_s"`
	HiReqS *float64 `json:"hi_req_s"`
}

// CapacityProbe is one replay at one load, summarised from its
// online_results.json summary. A probe passes when it is valid and its SLO
// attainment reaches the goodput target.
type CapacityProbe struct {
	RateReqS      float64  `json:"rate_req_s"` // offered
	Scale         float64  `json:"scale"`      // the replay's trace scale
	Phase         string   `json:"phase"`      // bracket, bisect or confirm
	SLOAttainment float64  `json:"slo_attainment"`
	Pass          bool     `json:"pass"`
	Valid         bool     `json:"valid"`
	InvalidReason string   `json:"invalid_reason,omitempty"`
	NumRequests   int      `json:"num_requests"`
	NumSuccess    int      `json:"num_success"`
	ReqPerS       float64  `json:"req_per_s"` // achieved: successes / duration
	TTFTP90Ms     *float64 `json:"ttft_p90_ms"`
	TPOTP90Ms     *float64 `json:"tpot_p90_ms"`
	SendLagP99Ms  *float64 `json:"send_lag_p99_ms"`
	WallS         float64  `json:"wall_s"`
}

// LoadCapacity reads a capacity.json.
func LoadCapacity(path string) (*Capacity, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read capacity results: %w", err)
	}
	var c Capacity
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("%s: decode capacity results: %w", path, err)
	}
	if c.Backends == nil {
		return nil, fmt.Errorf("%s: %w", path, errors.New("no backends list (not a capacity.json?)"))
	}
	return &c, nil
}
