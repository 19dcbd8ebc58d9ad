package plots

import (
	"cmp"
	"slices"

	"github.com/roseinfer/roseinfer/results"
)

// latencyMetric is one of the four latency figures of an online run.
type latencyMetric struct {
	Key    string // JSON key of the stats object, also the Spread key prefix
	Title  string
	YLabel string
	get    func(*results.Summary) results.Stats
}

var latencyMetrics = []latencyMetric{
	{"ttft_ms", "TTFT", "TTFT (ms)", func(s *results.Summary) results.Stats { return s.TTFTMs }},
	{"tpot_ms", "TPOT", "TPOT (ms/token)", func(s *results.Summary) results.Stats { return s.TPOTMs }},
	{"itl_ms", "ITL", "ITL (ms/token)", func(s *results.Summary) results.Stats { return s.ITLMs }},
	{"e2e_ms", "E2E", "E2E (ms)", func(s *results.Summary) results.Stats { return s.E2EMs }},
}

const xLabel = "Trace time scale (smaller = higher load)"

// interval is a 95% confidence interval across repeat rounds.
type interval struct{ Low, High float64 }

// latencyPoint is one scale of one backend for one metric.
type latencyPoint struct {
	Scale         float64
	P50, P90, P99 *float64
	CI50, CI90    *interval // error bars (repeat rounds only)
	CI99          *interval
	Valid         bool
}

// backendSeries is one backend label across scales.
type backendSeries struct {
	Label   string // canonical label (sort key, style key)
	Name    string // display name
	Style   seriesStyle
	Failed  bool // no successful request at any scale, or the backend errored
	Summary []*results.Summary
}

// onlineBackends groups the run's per-scale summaries by canonical label,
// sorted like the original (by label), each sorted by scale. Backends that
// failed before producing any summary appear with no points.
func onlineBackends(on *results.Online) []*backendSeries {
	sums := aggregateSummaries(on)
	var labels []string
	for _, s := range sums {
		labels = append(labels, s.Backend)
	}
	for label := range on.ByBackend {
		labels = append(labels, label)
	}
	canon := results.CanonicalLabels(labels)
	byLabel := map[string]*backendSeries{}
	get := func(raw string) *backendSeries {
		key := canon[raw]
		bs := byLabel[key]
		if bs == nil {
			bs = &backendSeries{Label: key, Name: results.BackendDisplayName(key), Failed: true}
			byLabel[key] = bs
		}
		return bs
	}
	for _, s := range sums {
		bs := get(s.Backend)
		bs.Summary = append(bs.Summary, s)
		if s.NumSuccess > 0 {
			bs.Failed = false
		}
	}
	for label, b := range on.ByBackend {
		bs := get(label)
		if b != nil && b.Error != "" {
			bs.Failed = true
		}
	}
	out := make([]*backendSeries, 0, len(byLabel))
	for _, bs := range byLabel {
		slices.SortStableFunc(bs.Summary, func(a, b *results.Summary) int { return cmp.Compare(a.Scale, b.Scale) })
		out = append(out, bs)
	}
	slices.SortFunc(out, func(a, b *backendSeries) int { return cmp.Compare(a.Label, b.Label) })
	labelsSorted := make([]string, len(out))
	for i, bs := range out {
		labelsSorted[i] = bs.Label
	}
	styles := assignStyles(labelsSorted)
	for _, bs := range out {
		bs.Style = styles[bs.Label]
	}
	return out
}

// aggregateSummaries returns one summary per (label, scale): the run's flat
// list, or, for files that only carry by_backend, each run's summary. With
// --repeat the aggregate (round 0) wins over per-round entries.
func aggregateSummaries(on *results.Online) []*results.Summary {
	type key struct {
		label string
		scale float64
	}
	chosen := map[key]*results.Summary{}
	var order []key
	add := func(s *results.Summary) {
		k := key{s.Backend, s.Scale}
		prev, seen := chosen[k]
		if !seen {
			order = append(order, k)
		}
		if !seen || (prev.Round != 0 && s.Round == 0) {
			chosen[k] = s
		}
	}
	for i := range on.Summaries {
		add(&on.Summaries[i])
	}
	if len(on.Summaries) == 0 {
		labels := make([]string, 0, len(on.ByBackend))
		for label := range on.ByBackend {
			labels = append(labels, label)
		}
		slices.Sort(labels)
		for _, label := range labels {
			b := on.ByBackend[label]
			if b == nil {
				continue
			}
			for i := range b.Runs {
				s := b.Runs[i].Summary // a copy: the caller's results stay untouched
				if s.Backend == "" {
					s.Backend = label
				}
				if s.Scale == 0 {
					s.Scale = b.Runs[i].Scale
				}
				add(&s)
			}
		}
	}
	out := make([]*results.Summary, 0, len(order))
	for _, k := range order {
		out = append(out, chosen[k])
	}
	return out
}

// points extracts one metric of a backend, one point per scale.
func (bs *backendSeries) points(m latencyMetric) []latencyPoint {
	pts := make([]latencyPoint, 0, len(bs.Summary))
	for _, s := range bs.Summary {
		st := m.get(s)
		pts = append(pts, latencyPoint{
			Scale: s.Scale,
			P50:   finite(st.P50), P90: finite(st.P90), P99: finite(st.P99),
			CI50:  spreadInterval(s.Spread, m.Key+".p50"),
			CI90:  spreadInterval(s.Spread, m.Key+".p90"),
			CI99:  spreadInterval(s.Spread, m.Key+".p99"),
			Valid: s.Valid,
		})
	}
	return pts
}

// spreadInterval is the across-rounds CI of one figure, when there were at
// least two rounds to compute it from.
func spreadInterval(spread map[string]results.Spread, key string) *interval {
	sp, ok := spread[key]
	if !ok || sp.Rounds < 2 || finite(sp.CILow) == nil || finite(sp.CIHigh) == nil {
		return nil
	}
	return &interval{Low: *sp.CILow, High: *sp.CIHigh}
}

// finite drops values that cannot be drawn.
func finite(v *float64) *float64 {
	if v == nil || *v != *v || *v > 1e300 || *v < -1e300 {
		return nil
	}
	return v
}

// scalesOf lists the distinct scales of all backends, ascending.
func scalesOf(backends []*backendSeries) []float64 {
	var xs []float64
	for _, bs := range backends {
		for _, s := range bs.Summary {
			xs = append(xs, s.Scale)
		}
	}
	slices.Sort(xs)
	return slices.Compact(xs)
}
