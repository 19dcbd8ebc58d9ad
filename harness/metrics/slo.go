package metrics

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/roseinfer/roseinfer/results"
)

// SLO is a set of per-request latency objectives for goodput: metric name →
// threshold in milliseconds. Names: "ttft", "tpot", "e2e".
type SLO map[string]float64

// sloMetrics are the figures an SLO can bound, with the aliases users bring
// from other tools (vLLM's e2el).
var sloMetrics = map[string]string{"ttft": "ttft", "tpot": "tpot", "e2e": "e2e", "e2el": "e2e"}

// ParseSLO reads the --slo flag: comma-separated metric=threshold pairs such
// as "ttft=200ms,tpot=50ms". A threshold takes a Go duration unit (us, ms,
// s); a bare number is milliseconds. An empty string is no SLO (nil).
func ParseSLO(s string) (SLO, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	slo := SLO{}
	for _, part := range strings.Split(s, ",") {
		name, value, found := strings.Cut(strings.TrimSpace(part), "=")
		if !found {
			return nil, fmt.Errorf("slo %q: want metric=threshold, e.g. ttft=200ms", part)
		}
		metric, known := sloMetrics[strings.ToLower(strings.TrimSpace(name))]
		if !known {
			return nil, fmt.Errorf("slo %q: unknown metric %q (want ttft, tpot or e2e)", part, name)
		}
		if _, dup := slo[metric]; dup {
			return nil, fmt.Errorf("slo %q: %s given twice", s, metric)
		}
		ms, err := parseMillis(strings.TrimSpace(value))
		if err != nil {
			return nil, fmt.Errorf("slo %q: %w", part, err)
		}
		slo[metric] = ms
	}
	return slo, nil
}

func parseMillis(v string) (float64, error) {
	ms, err := strconv.ParseFloat(v, 64)
	if err != nil {
		d, derr := time.ParseDuration(strings.ReplaceAll(v, "µ", "u"))
		if derr != nil {
			return 0, fmt.Errorf("threshold %q: want a duration such as 200ms or 0.2s", v)
		}
		ms = float64(d) / float64(time.Millisecond)
	}
	if !(ms > 0) || ms > 1e12 {
		return 0, fmt.Errorf("threshold %q: must be positive", v)
	}
	return ms, nil
}

// String writes the SLO back in flag syntax, metrics in name order.
func (s SLO) String() string {
	names := make([]string, 0, len(s))
	for name := range s {
		names = append(names, name)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = name + "=" + strconv.FormatFloat(s[name], 'g', -1, 64) + "ms"
	}
	return strings.Join(parts, ",")
}

// Meets says whether one request is "good", docs/METRICS.md: "goodput = requests
// meeting every given SLO (e.g. TTFT ≤ x ms, TPOT ≤ y ms) per second; errors
// never count as good." A success without a first token fails a TTFT
// objective; one with fewer than two tokens has no TPOT and so cannot
// violate a TPOT objective.
func (s SLO) Meets(r *results.Request) bool {
	if !Succeeded(r) {
		return false
	}
	for metric, limitMs := range s {
		var seconds float64
		switch metric {
		case "ttft":
			v, ok := TTFT(r)
			if !ok {
				return false
			}
			seconds = v
		case "tpot":
			v, ok := TPOT(r)
			if !ok {
				continue
			}
			seconds = v
		case "e2e":
			seconds = E2E(r)
		default:
			return false // not from ParseSLO; refuse rather than ignore
		}
		if seconds*1000 > limitMs {
			return false
		}
	}
	return true
}

// Attainment is the share of requests that meet every objective,
// docs/METRICS.md: "SLO attainment = requests meeting every SLO / requests
// sent". Errors count as sent and never as good, so a server that sheds load
// cannot raise it; no request at all is 0.
func (s SLO) Attainment(reqs []results.Request) float64 {
	if len(reqs) == 0 {
		return 0
	}
	return float64(countGood(reqs, s)) / float64(len(reqs))
}
