package report

// What bench ab, which judges B/A ratios rather than two results files,
// takes from the --fail-on rules of bench compare.

// CanonicalOnlineMetric resolves a --fail-on metric name to the name online
// comparisons report it under ("output_tok_s" is "tok_per_s"); ok is false
// when the name is not an online metric.
func CanonicalOnlineMetric(name string) (canonical string, ok bool) {
	ref, ok := onlineMetric(name)
	return ref.name, ok
}

// Breached reports whether a relative change, in percent, crosses the rule.
func (r CompareRule) Breached(deltaPct float64) bool { return r.breached(deltaPct) }
