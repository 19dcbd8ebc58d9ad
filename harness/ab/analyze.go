package ab

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/roseinfer/roseinfer/harness/bootstrap"
	"github.com/roseinfer/roseinfer/harness/metrics"
	"github.com/roseinfer/roseinfer/harness/report"
	"github.com/roseinfer/roseinfer/results"
)

// The labels of the two sides in online_results.json.
const (
	LabelA = "A"
	LabelB = "B"
)

// MetaKey is the online_results.json meta entry that describes an A/B run
// (the sides and the order of rounds).
const MetaKey = "ab"

// Meta is meta[MetaKey].
type Meta struct {
	A     Side   `json:"a"`
	B     Side   `json:"b"`
	Order string `json:"order"` // one scale's rounds, e.g. ABBAABBA
	Pairs int    `json:"round_pairs"`
}

// Result is ab.json: every figure's B/A ratio with its interval, per scale,
// and the verdict of each rule.
type Result struct {
	A         Side          `json:"a"`
	B         Side          `json:"b"`
	Order     string        `json:"order"`
	Pairs     int           `json:"round_pairs"`
	Bootstrap BootstrapInfo `json:"bootstrap"`
	Rules     []string      `json:"rules"`
	// DefaultRules: Rules are report.DefaultFailOn (no --fail-on given).
	DefaultRules bool `json:"default_rules,omitempty"`
	Checks       int  `json:"checks"` // rows a rule was evaluated on
	Regressions  int  `json:"regressions"`
	// Unevaluated names each rule (and scale) that could not be judged: a
	// metric bench ab does not measure, a ratio without an interval, a
	// baseline (A) that lost requests. bench ab exits 2 on any.
	Unevaluated []string `json:"unevaluated,omitempty"`
	Warnings    []string `json:"warnings,omitempty"`
	Rows        []Row    `json:"rows"`
}

// BootstrapInfo says how the intervals were made.
type BootstrapInfo struct {
	Method     string  `json:"method"`
	Confidence float64 `json:"confidence"`
	Iterations int     `json:"iterations"`
	Seed       uint64  `json:"seed"`
}

// Row is one scale × metric, judged by one rule (or by none).
type Row struct {
	Scale  float64     `json:"scale"`
	Metric string      `json:"metric"`
	A      *float64    `json:"a"`     // over all of A's rounds, as the pooled summary
	B      *float64    `json:"b"`     //
	Ratio  *float64    `json:"ratio"` // B / A
	CI     *[2]float64 `json:"ci95"`
	// Differs: the interval excludes 1.0.
	Differs bool   `json:"differs"`
	Rule    string `json:"rule,omitempty"`
	Status  string `json:"status"` // report's statuses: ok, regression, within_noise, info, n/a
	Note    string `json:"note,omitempty"`
}

// Metrics lists the figures bench ab judges, by their --fail-on names.
func Metrics() []string {
	var out []string
	for _, f := range latencyFigures {
		for _, s := range latencyStats {
			out = append(out, f.name+"."+s.name)
		}
	}
	return append(out, "tok_per_s", "req_per_s")
}

// Analyze judges B against A from an A/B run's records (Run's
// online_results.json): per scale, the round pairs both sides finished, each
// figure's B/A ratio over all of them with its bootstrap interval, and each
// rule's verdict.
func Analyze(on *results.Online, st Stats) (*Result, error) {
	if err := st.Validate(); err != nil {
		return nil, err
	}
	sides := [2]*results.Backend{on.ByBackend[LabelA], on.ByBackend[LabelB]}
	for i, b := range sides {
		if b == nil {
			return nil, fmt.Errorf("no side %s in the results: not a bench ab run", []string{LabelA, LabelB}[i])
		}
	}
	res := &Result{Rules: []string{},
		Bootstrap: BootstrapInfo{Method: "paired two-level bootstrap (ABBA blocks, then requests within them), expanded percentile interval",
			Confidence: 0.95, Iterations: st.Iterations, Seed: st.Seed}}
	if m, ok := readMeta(on); ok {
		res.A, res.B, res.Order, res.Pairs = m.A, m.B, m.Order, m.Pairs
	}
	for _, r := range st.Rules {
		res.Rules = append(res.Rules, r.String())
		res.DefaultRules = r.Default
	}
	rules := res.applicableRules(st.Rules)
	for _, scale := range scalesOf(sides[0]) {
		res.judgeScale(scale, sides, rules, st)
	}
	for _, row := range res.Rows {
		if row.Rule == "" {
			continue
		}
		res.Checks++
		switch row.Status {
		case report.StatusRegression:
			res.Regressions++
		case report.StatusNA:
			res.Unevaluated = append(res.Unevaluated, fmt.Sprintf("%s: scale %s: %s", row.Rule, formatScale(row.Scale), row.Note))
		}
	}
	return res, nil
}

// applicableRules keeps the rules whose metric bench ab measures; the others
// are named as unevaluated (or, for a default rule, warned about).
func (res *Result) applicableRules(rules []report.CompareRule) map[string][]report.CompareRule {
	out := map[string][]report.CompareRule{}
	measured := Metrics()
	for _, r := range rules {
		name, ok := report.CanonicalOnlineMetric(r.Metric)
		switch {
		case ok && slices.Contains(measured, name):
			out[name] = append(out[name], r)
		case r.Default:
			res.Warnings = append(res.Warnings, fmt.Sprintf("default rule %s: bench ab does not measure %s", r, r.Metric))
		default:
			res.Unevaluated = append(res.Unevaluated, fmt.Sprintf("%s: bench ab does not measure %s (it measures %s)",
				r, r.Metric, strings.Join(measured, ", ")))
		}
	}
	return out
}

// judgeScale adds one scale's rows.
func (res *Result) judgeScale(scale float64, sides [2]*results.Backend, rules map[string][]report.CompareRule, st Stats) {
	var rounds [2]map[int][]results.Request
	for s, b := range sides {
		rounds[s] = map[int][]results.Request{}
		for _, run := range b.Runs {
			if run.Scale == scale && run.Round > 0 {
				rounds[s][run.Round] = run.RequestMetrics
				if !run.Summary.Valid {
					res.Warnings = append(res.Warnings, fmt.Sprintf("%s scale %s round %d: %s", b.Backend, formatScale(scale),
						run.Round, run.Summary.InvalidReason))
				}
			}
		}
	}
	var pairs []int
	for round := range rounds[0] {
		if _, ok := rounds[1][round]; ok {
			pairs = append(pairs, round)
		}
	}
	slices.Sort(pairs)
	d, err := newDesign(pairs, rounds)
	if err != nil {
		res.Unevaluated = append(res.Unevaluated, fmt.Sprintf("scale %s: %v", formatScale(scale), err))
		return
	}
	if n := d.layout.NumBlocks(); n < minBlocks {
		res.Warnings = append(res.Warnings, fmt.Sprintf("scale %s: %d round pairs make %d ABBA blocks: an interval from so few "+
			"cannot reach past their spread (use --rounds %d or more)", formatScale(scale), len(pairs), n, minBlocks*pairsPerBlock))
	}
	res.checkSuccess(scale, d, st.MinSuccessRate)
	names, intervals, err := d.ratios(st)
	if err != nil {
		res.Unevaluated = append(res.Unevaluated, fmt.Sprintf("scale %s: %v", formatScale(scale), err))
		return
	}
	for i, name := range names {
		res.addRows(scale, name, intervals[i], rules[name])
	}
}

// minBlocks is the fewest ABBA blocks judged without a warning. No
// bootstrap interval reaches past the range of the blocks it draws, and with
// n blocks of identical sides all n fall on the same side of 1.0 with
// probability 2^(1−n): 12% for 4 blocks, 3% for 6, 0.8% for 8.
const minBlocks = 6

// checkSuccess judges each side's share of successful requests: B below the
// floor is a regression (it lost requests A served); A below it leaves
// nothing sound to compare against.
func (res *Result) checkSuccess(scale float64, d *design, floor float64) {
	rate := [2]float64{}
	for s := range 2 {
		ok, all := 0, 0
		for _, reqs := range d.rounds[s] {
			for i := range reqs {
				all++
				if metrics.Succeeded(&reqs[i]) {
					ok++
				}
			}
		}
		rate[s] = float64(ok) / float64(max(all, 1))
	}
	row := Row{Scale: scale, Metric: "success_rate", A: ptr(rate[0]), B: ptr(rate[1]), Status: report.StatusInfo}
	if rate[0] > 0 {
		row.Ratio = ptr(rate[1] / rate[0])
	}
	if rate[1] < floor {
		row.Rule = fmt.Sprintf("success_rate>=%g", floor)
		row.Status = report.StatusRegression
		row.Note = "B lost requests"
	}
	if rate[0] < floor {
		res.Unevaluated = append(res.Unevaluated, fmt.Sprintf("scale %s: A's success rate %.4f is below %g: the baseline is unusable",
			formatScale(scale), rate[0], floor))
	}
	res.Rows = append(res.Rows, row)
}

// addRows adds one metric's row per rule naming it, or one row for
// information.
func (res *Result) addRows(scale float64, metric string, iv bootstrap.Interval, rules []report.CompareRule) {
	row := Row{Scale: scale, Metric: metric, A: finite(iv.A), B: finite(iv.B), Ratio: finite(iv.Ratio), Status: report.StatusInfo}
	if lo, hi := finite(iv.Low), finite(iv.High); lo != nil && hi != nil {
		row.CI = &[2]float64{*lo, *hi}
		row.Differs = !iv.Contains(1)
	}
	if len(rules) == 0 {
		res.Rows = append(res.Rows, row)
		return
	}
	for _, r := range rules {
		rr := row
		rr.Rule = r.String()
		rr.Status, rr.Note = judge(rr, r)
		res.Rows = append(res.Rows, rr)
	}
}

// judge is bench compare's rule applied to a ratio: a change beyond the
// rule is a regression when the interval excludes 1.0 on the rule's side
// (the change is real), and within_noise when it does not.
func judge(row Row, r report.CompareRule) (status, note string) {
	switch {
	case row.Ratio == nil:
		return report.StatusNA, "no ratio: the metric is undefined on a side, or zero in A"
	case row.CI == nil:
		return report.StatusNA, "no interval: too many resamples left a side without samples"
	case !r.Breached((*row.Ratio - 1) * 100):
		return report.StatusOK, ""
	case r.Above && row.CI[0] > 1, !r.Above && row.CI[1] < 1:
		return report.StatusRegression, ""
	}
	return report.StatusNoise, "beyond the rule, but the interval holds 1.0"
}

// readMeta reads meta[MetaKey] back (a map after a round trip through JSON).
func readMeta(on *results.Online) (Meta, bool) {
	var m Meta
	raw, ok := on.Meta[MetaKey]
	if !ok {
		return m, false
	}
	data, err := json.Marshal(raw)
	if err != nil || json.Unmarshal(data, &m) != nil {
		return m, false
	}
	return m, true
}

// scalesOf lists the scales of a side's rounds, in the order first run.
func scalesOf(b *results.Backend) []float64 {
	var out []float64
	for _, run := range b.Runs {
		if !slices.Contains(out, run.Scale) {
			out = append(out, run.Scale)
		}
	}
	return out
}

func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func ptr(v float64) *float64 { return &v }
