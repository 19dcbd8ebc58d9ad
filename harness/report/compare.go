package report

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/roseinfer/roseinfer/results"
)

// A CompareRule is one --fail-on threshold, e.g. "ttft_ms.p99>+10%": the
// current value counts as a regression when its change against the baseline
// is above +10% (or, with "<", below the given percentage).
type CompareRule struct {
	Metric  string  `json:"metric"`
	Above   bool    `json:"above"`   // ">" (true) or "<"
	Percent float64 `json:"percent"` // signed threshold in percent
	// Default marks the rules of DefaultFailOn: one that matches no metric
	// of the runs (TTFT in an offline-only comparison) is only a warning,
	// where a rule the user named must be evaluated somewhere.
	Default bool `json:"-"`
}

// DefaultFailOn are the rules bench compare applies without --fail-on:
// latency tails may grow by 10% and output throughput may drop by 5%. Ten
// per cent is above the run-to-run spread of a p90/p99 on a quiet machine
// (docs/BENCHMARKS.md's A/Bs agree within 1-3%); throughput, a mean over the
// whole run, is steadier, hence 5%.
const DefaultFailOn = "ttft_ms.p90>+10%,ttft_ms.p99>+10%,tpot_ms.p90>+10%,tpot_ms.p99>+10%," +
	"itl_ms.p99>+10%,e2e_ms.p99>+10%,output_tok_s<-5%"

// DefaultRules parses DefaultFailOn.
func DefaultRules() []CompareRule {
	rules, err := ParseFailOn(DefaultFailOn)
	if err != nil {
		panic(err)
	}
	for i := range rules {
		rules[i].Default = true
	}
	return rules
}

func (r CompareRule) String() string {
	op := "<"
	if r.Above {
		op = ">"
	}
	return fmt.Sprintf("%s%s%+g%%", r.Metric, op, r.Percent)
}

// breached reports whether a relative change (in percent) crosses the rule.
func (r CompareRule) breached(deltaPct float64) bool {
	if r.Above {
		return deltaPct > r.Percent
	}
	return deltaPct < r.Percent
}

// ParseFailOn parses a comma-separated --fail-on list such as
// "ttft_ms.p99>+10%,output_tok_s<-5%". Metric names are checked against the
// online and offline metrics Compare knows.
func ParseFailOn(spec string) ([]CompareRule, error) {
	var rules []CompareRule
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		i := strings.IndexAny(item, "<>")
		if i <= 0 {
			return nil, fmt.Errorf("--fail-on %q: want METRIC>+N%% or METRIC<-N%%", item)
		}
		metric := strings.TrimSpace(item[:i])
		num := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(item[i+1:]), "%"))
		pct, err := strconv.ParseFloat(num, 64)
		if err != nil || math.IsNaN(pct) || math.IsInf(pct, 0) {
			return nil, fmt.Errorf("--fail-on %q: bad percentage %q", item, item[i+1:])
		}
		if _, okOn := onlineMetric(metric); !okOn {
			if _, okOff := offlineMetric(metric); !okOff {
				return nil, fmt.Errorf("--fail-on %q: unknown metric %q (known: %s)", item, metric, strings.Join(KnownCompareMetrics(), ", "))
			}
		}
		rules = append(rules, CompareRule{Metric: metric, Above: item[i] == '>', Percent: pct})
	}
	return rules, nil
}

// Comparison statuses.
const (
	StatusOK         = "ok"           // within its rule
	StatusRegression = "regression"   // beyond its rule (and outside the noise)
	StatusNoise      = "within_noise" // beyond its rule, but the 95% CIs overlap
	StatusMissing    = "missing"      // in the baseline, gone from the current run
	StatusNew        = "new"          // only in the current run
	StatusInfo       = "info"         // no rule names this metric
	StatusNA         = "n/a"          // no relative change (zero or empty baseline)
)

// CompareRow is one backend × scale × metric.
type CompareRow struct {
	Kind       string      `json:"kind"` // online or offline
	Backend    string      `json:"backend"`
	Scale      *float64    `json:"scale,omitempty"`
	Metric     string      `json:"metric"`
	Baseline   *float64    `json:"baseline"`
	Current    *float64    `json:"current"`
	DeltaPct   *float64    `json:"delta_pct"`
	BaselineCI *[2]float64 `json:"baseline_ci95,omitempty"`
	CurrentCI  *[2]float64 `json:"current_ci95,omitempty"`
	Rule       string      `json:"rule,omitempty"`
	Status     string      `json:"status"`
	Note       string      `json:"note,omitempty"`
}

// Comparison is the result of comparing two runs.
type Comparison struct {
	Baseline    string   `json:"baseline"`
	Current     string   `json:"current"`
	BaselineRun string   `json:"baseline_run,omitempty"` // one-line description from meta
	CurrentRun  string   `json:"current_run,omitempty"`
	Rules       []string `json:"rules"`
	DefaultRule bool     `json:"default_rules,omitempty"` // Rules are DefaultFailOn (no --fail-on given)
	Checks      int      `json:"checks"`                  // rows a rule was evaluated on
	Regressions int      `json:"regressions"`
	// Unevaluated names each rule (and where) that could not be evaluated:
	// a null or zero baseline, a null on both sides, or a --fail-on rule
	// that matched no metric of the runs. bench compare exits 2 on any.
	Unevaluated []string     `json:"unevaluated,omitempty"`
	Rows        []CompareRow `json:"rows"`
	Warnings    []string     `json:"warnings,omitempty"`
}

// RunPair is what one side of a comparison loaded (either kind may be nil).
type RunPair struct {
	Path    string
	Online  *results.Online
	Offline *results.Offline
}

// ErrNothingToCompare means the two runs share no backend × scale.
var ErrNothingToCompare = errors.New("baseline and current share no backend and scale")

// CompareRuns loads the baseline and current runs (each a run directory or
// one results file) and compares them (Compare).
func CompareRuns(baseline, current string, rules []CompareRule) (*Comparison, error) {
	baseOn, baseOff, err := results.LoadRun(baseline)
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	curOn, curOff, err := results.LoadRun(current)
	if err != nil {
		return nil, fmt.Errorf("current: %w", err)
	}
	return Compare(RunPair{Path: baseline, Online: baseOn, Offline: baseOff},
		RunPair{Path: current, Online: curOn, Offline: curOff}, rules)
}

// Compare evaluates current against baseline per backend × scale × metric.
// A row breaks its rule when the relative change crosses the threshold; with
// repeat rounds on both sides it counts as a regression only when the two
// 95% confidence intervals do not overlap. A backend × scale that disappeared
// breaks every rule that applies to it.
func Compare(base, cur RunPair, rules []CompareRule) (*Comparison, error) {
	c := &Comparison{Baseline: base.Path, Current: cur.Path, Rules: []string{}}
	for _, r := range rules {
		c.Rules = append(c.Rules, r.String())
		c.DefaultRule = r.Default
	}
	c.BaselineRun, c.CurrentRun = describeRun(base), describeRun(cur)
	matched := 0
	if base.Online != nil && cur.Online != nil {
		matched += c.compareOnline(base.Online, cur.Online, rules)
	} else if base.Online != nil || cur.Online != nil {
		c.Warnings = append(c.Warnings, "online results on one side only: not compared")
	}
	if base.Offline != nil && cur.Offline != nil {
		matched += c.compareOffline(base.Offline, cur.Offline, rules)
	} else if base.Offline != nil || cur.Offline != nil {
		c.Warnings = append(c.Warnings, "offline results on one side only: not compared")
	}
	if matched == 0 {
		return c, ErrNothingToCompare
	}
	for _, r := range rules {
		applied := false
		for _, row := range c.Rows {
			applied = applied || row.Rule == r.String()
		}
		switch {
		case applied:
		case r.Default:
			c.Warnings = append(c.Warnings, fmt.Sprintf("default rule %s matched no metric of these runs", r))
		default:
			c.Unevaluated = append(c.Unevaluated, fmt.Sprintf("%s: matched no metric of these runs", r))
		}
	}
	for _, row := range c.Rows {
		if row.Rule != "" {
			c.Checks++
		}
		if row.Rule != "" && row.Status == StatusNA {
			c.Unevaluated = append(c.Unevaluated, fmt.Sprintf("%s: %s: %s", row.Rule, row.where(), whyNA(row)))
		}
		if row.Status == StatusRegression || (row.Status == StatusMissing && row.Rule != "") {
			c.Regressions++
		}
	}
	return c, nil
}

// metricsFor lists the canonical metrics shown for one kind: the defaults
// plus those the rules name.
func metricsFor(defaults []string, rules []CompareRule, resolve func(string) (metricRef, bool)) []string {
	out := slices.Clone(defaults)
	for _, r := range rules {
		if ref, ok := resolve(r.Metric); ok && !slices.Contains(out, ref.name) {
			out = append(out, ref.name)
		}
	}
	return out
}

// rulesFor returns the rules whose metric resolves to the canonical name
// (so output_tok_s applies to online tok_per_s and offline
// output_throughput_tps alike).
func rulesFor(canonical string, rules []CompareRule, resolve func(string) (metricRef, bool)) []CompareRule {
	var out []CompareRule
	for _, r := range rules {
		if ref, ok := resolve(r.Metric); ok && ref.name == canonical {
			out = append(out, r)
		}
	}
	return out
}

func (c *Comparison) compareOnline(base, cur *results.Online, rules []CompareRule) int {
	baseSums, curSums := indexSummaries(base), indexSummaries(cur)
	keys := unionKeys(baseSums, curSums, byLabelThenScale)
	metrics := metricsFor(defaultOnlineMetrics, rules, onlineMetric)
	matched := 0
	for _, k := range keys {
		b, cu := baseSums[k], curSums[k]
		if b != nil && cu != nil {
			matched++
		}
		var note string
		if cu != nil && !cu.Valid {
			note = "current scale invalid: " + cmp.Or(cu.InvalidReason, "send lag over threshold")
			c.Warnings = append(c.Warnings, fmt.Sprintf("%s scale %s: %s", k.label, k.scale, note))
		}
		scale := scaleOf(b, cu)
		for _, m := range metrics {
			ref, _ := onlineMetric(m)
			bv, bci := sideFigures(b, ref.online, summarySpreads, ref.spreadKey, m)
			cv, cci := sideFigures(cu, ref.online, summarySpreads, ref.spreadKey, m)
			c.addRows(CompareRow{Kind: "online", Backend: k.label, Scale: &scale, Metric: m,
				Baseline: bv, Current: cv, BaselineCI: bci, CurrentCI: cci, Note: note}, b != nil, cu != nil, rulesFor(m, rules, onlineMetric))
		}
	}
	return matched
}

func (c *Comparison) compareOffline(base, cur *results.Offline, rules []CompareRule) int {
	baseRes, curRes := indexOffline(base), indexOffline(cur)
	labels := unionKeys(baseRes, curRes, strings.Compare)
	metrics := metricsFor(defaultOfflineMetrics, rules, offlineMetric)
	matched := 0
	for _, label := range labels {
		b, cu := baseRes[label], curRes[label]
		if b != nil && cu != nil {
			matched++
		}
		var note string
		if cu != nil {
			if errText, _ := cu.Extra["error"].(string); errText != "" {
				note = "current run failed: " + firstErrorLine(errText)
			}
		}
		for _, m := range metrics {
			ref, _ := offlineMetric(m)
			bv, bci := sideFigures(b, ref.offline, offlineSpreads, ref.spreadKey, m)
			cv, cci := sideFigures(cu, ref.offline, offlineSpreads, ref.spreadKey, m)
			c.addRows(CompareRow{Kind: "offline", Backend: label, Metric: m, Baseline: bv, Current: cv,
				BaselineCI: bci, CurrentCI: cci, Note: note}, b != nil, cu != nil, rulesFor(m, rules, offlineMetric))
		}
	}
	return matched
}

// sideFigures reads one metric from one side's entry (a summary or an offline
// result): its finite value and its CI across rounds, or nils when that side
// has no such entry.
func sideFigures[T any](entry *T, value func(*T) *float64, spreads func(*T) map[string]results.Spread, spreadKey, metric string) (*float64, *[2]float64) {
	if entry == nil {
		return nil, nil
	}
	return finitePtr(value(entry)), spreadCI(spreads(entry), spreadKey, metric)
}

func summarySpreads(s *results.Summary) map[string]results.Spread       { return s.Spread }
func offlineSpreads(r *results.OfflineResult) map[string]results.Spread { return r.Spread }

// addRows evaluates row against each rule naming its metric (one row per
// rule), or adds it once for information.
func (c *Comparison) addRows(row CompareRow, inBase, inCur bool, rules []CompareRule) {
	if row.Baseline != nil && row.Current != nil && *row.Baseline != 0 {
		row.DeltaPct = ptr((*row.Current - *row.Baseline) / math.Abs(*row.Baseline) * 100)
	}
	if len(rules) == 0 {
		row.Status = StatusInfo
		switch {
		case !inCur:
			row.Status = StatusMissing
		case !inBase:
			row.Status = StatusNew
		}
		c.Rows = append(c.Rows, row)
		return
	}
	for _, r := range rules {
		rr := row
		rr.Rule = r.String()
		rr.Status = evaluate(rr, inBase, inCur, r)
		c.Rows = append(c.Rows, rr)
	}
}

func evaluate(row CompareRow, inBase, inCur bool, r CompareRule) string {
	switch {
	case !inBase:
		return StatusNew
	case !inCur:
		return StatusMissing
	case row.Baseline != nil && row.Current == nil:
		return StatusMissing // e.g. every request failed: the metric has no value
	case row.DeltaPct == nil:
		return StatusNA
	case !r.breached(*row.DeltaPct):
		return StatusOK
	case row.BaselineCI != nil && row.CurrentCI != nil && overlaps(*row.BaselineCI, *row.CurrentCI):
		return StatusNoise
	}
	return StatusRegression
}

// where names a row's backend and scale, e.g. "roseinfer scale 0.4".
func (r CompareRow) where() string {
	if r.Scale == nil {
		return r.Kind + " " + r.Backend
	}
	return r.Backend + " scale " + formatScale(*r.Scale)
}

// whyNA says why a rule had no relative change to test.
func whyNA(r CompareRow) string {
	switch {
	case r.Baseline == nil && r.Current == nil:
		return "null in baseline and current"
	case r.Baseline == nil:
		return "null in the baseline"
	case *r.Baseline == 0:
		return "zero in the baseline"
	}
	return "no relative change"
}

func overlaps(a, b [2]float64) bool { return a[0] <= b[1] && b[0] <= a[1] }

type scaleKey struct {
	label string
	scale string // formatted, so 0.4 from two files matches exactly
}

func formatScale(s float64) string { return strconv.FormatFloat(s, 'g', 6, 64) }

func scaleOf(a, b *results.Summary) float64 {
	if a != nil {
		return a.Scale
	}
	return b.Scale
}

// indexSummaries keys a run's aggregate summaries by canonical label and
// scale (round 0 wins over per-round entries; by_backend when the flat list
// is empty).
func indexSummaries(on *results.Online) map[scaleKey]*results.Summary {
	var all []*results.Summary
	for i := range on.Summaries {
		all = append(all, &on.Summaries[i])
	}
	if len(all) == 0 {
		for label, b := range on.ByBackend {
			if b == nil {
				continue
			}
			for i := range b.Runs {
				s := b.Runs[i].Summary
				s.Backend = cmp.Or(s.Backend, label)
				all = append(all, &s)
			}
		}
	}
	labels := make([]string, len(all))
	for i, s := range all {
		labels[i] = s.Backend
	}
	canon := results.CanonicalLabels(labels)
	out := map[scaleKey]*results.Summary{}
	for _, s := range all {
		k := scaleKey{canon[s.Backend], formatScale(s.Scale)}
		if prev := out[k]; prev == nil || (prev.Round != 0 && s.Round == 0) {
			out[k] = s
		}
	}
	return out
}

// unionKeys lists the keys found on either side once each, in order, so a
// backend (or backend x scale) present on one side only still gets its rows.
func unionKeys[K comparable, V any](a, b map[K]V, order func(x, y K) int) []K {
	seen := map[K]bool{}
	var keys []K
	for _, m := range []map[K]V{a, b} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	slices.SortFunc(keys, order)
	return keys
}

// byLabelThenScale orders online rows by backend, then numerically by scale.
func byLabelThenScale(x, y scaleKey) int {
	xs, _ := strconv.ParseFloat(x.scale, 64)
	ys, _ := strconv.ParseFloat(y.scale, 64)
	return cmp.Or(cmp.Compare(x.label, y.label), cmp.Compare(xs, ys))
}

func indexOffline(off *results.Offline) map[string]*results.OfflineResult {
	labels := make([]string, len(off.Results))
	for i := range off.Results {
		labels[i] = off.Results[i].Backend
	}
	canon := results.CanonicalLabels(labels)
	out := map[string]*results.OfflineResult{}
	for i := range off.Results {
		out[canon[off.Results[i].Backend]] = &off.Results[i]
	}
	return out
}

func firstErrorLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// describeRun is a one-line identity of a run from its meta: model, device,
// git revision and start time, where recorded.
func describeRun(r RunPair) string {
	var meta map[string]any
	if r.Online != nil {
		meta = r.Online.Meta
	} else if r.Offline != nil {
		meta = r.Offline.Meta
	}
	var parts []string
	for _, k := range []string{results.MetaModel, "gpu", results.MetaDevice, "run_start_time"} {
		if v, ok := meta[k]; ok && v != nil && fmt.Sprint(v) != "" {
			parts = append(parts, fmt.Sprintf("%s=%v", k, v))
		}
	}
	if versions, ok := meta[results.MetaVersions].(map[string]any); ok {
		if rev, ok := versions["git_rev"]; ok && rev != nil {
			parts = append(parts, fmt.Sprintf("git_rev=%v", rev))
		}
	}
	return strings.Join(parts, ", ")
}
