package metrics

import (
	"reflect"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/results"
)

// scaleFixture: three successes (one-token chunks, multi-token chunks, a
// single token) and one 5xx error that was sent 31.25 ms late.
func scaleFixture() []results.Request {
	return []results.Request{oneTokenChunks(), multiTokenChunks(), singleToken(), failed("http_5xx")}
}

func TestSummarizeScale(t *testing.T) {
	slo, err := ParseSLO("ttft=200ms,tpot=50ms")
	if err != nil {
		t.Fatal(err)
	}
	s := SummarizeScale(scaleFixture(), ScaleOptions{Backend: "roseinfer", Scale: 0.4, SLO: slo})

	// Successes span min(send) = 0.5 s to max(end) = 2.75 s.
	const duration = 2.25
	wantCounts := results.Summary{
		Backend: "roseinfer", Scale: 0.4, NumRequests: 4, NumSuccess: 3, NumError: 1, SuccessRate: 0.75,
		TotalOutputEvents: 8, TotalOutputTokens: 14, DurationS: duration,
		ReqPerS: 3 / duration, TokPerS: 14 / duration,
		ErrorsByKind: map[string]int{"http_5xx": 1},
	}
	got := s
	got.TTFTMs, got.TTFTScheduledMs, got.E2EMs, got.TPOTMs, got.ITLMs, got.ICLMs, got.SendLagMs =
		results.Stats{}, results.Stats{}, results.Stats{}, results.Stats{}, results.Stats{}, results.Stats{}, results.Stats{}
	got.GoodputReqPerS, got.SLOAttainment, got.SLO, got.Valid, got.InvalidReason = nil, nil, nil, false, ""
	if !reflect.DeepEqual(got, wantCounts) {
		t.Errorf("counts:\n got %+v\nwant %+v", got, wantCounts)
	}

	// Latency samples in ms, successes only; ITL and ICL pooled.
	stats := []struct {
		name    string
		got     results.Stats
		samples []float64
	}{
		{"ttft", s.TTFTMs, []float64{250, 125, 62.5}},
		{"ttft from scheduled", s.TTFTScheduledMs, []float64{257.8125, 125, 62.5}},
		{"e2e", s.E2EMs, []float64{562.5, 750, 125}},
		{"tpot (single token has none)", s.TPOTMs, []float64{0.25 / 3 * 1000, 46.875}},
		{"itl per token", s.ITLMs, []float64{62.5, 62.5, 125, 31.25, 31.25, 31.25, 31.25, 125, 125}},
		{"icl per chunk", s.ICLMs, []float64{62.5, 62.5, 125, 125, 250}},
		{"send lag (errors too)", s.SendLagMs, []float64{7.8125, 0, 0, 31.25}},
	}
	for _, st := range stats {
		if want := Summarize(st.samples); !reflect.DeepEqual(st.got, want) {
			t.Errorf("%s: got %s, want %s", st.name, show(st.got), show(want))
		}
	}
	if *s.TTFTMs.P50 != 125 || *s.ITLMs.Max != 125 || s.ITLMs.N != 9 || *s.E2EMs.Max != 750 {
		t.Errorf("spot values: ttft p50 %v, itl max %v n %d, e2e max %v", *s.TTFTMs.P50, *s.ITLMs.Max, s.ITLMs.N, *s.E2EMs.Max)
	}

	// Good: the multi-token request (TTFT 125, TPOT 46.875) and the single
	// token (TTFT 62.5, no TPOT); not the first (TTFT 250) nor the error.
	if s.GoodputReqPerS == nil || *s.GoodputReqPerS != 2/duration || !reflect.DeepEqual(s.SLO, map[string]float64(slo)) {
		t.Errorf("goodput = %v with SLO %v, want %v", show(struct{ G *float64 }{s.GoodputReqPerS}), s.SLO, 2/duration)
	}
	if s.SLOAttainment == nil || *s.SLOAttainment != 0.5 {
		t.Errorf("slo_attainment = %v, want 2 good of 4 sent", show(struct{ A *float64 }{s.SLOAttainment}))
	}
	// Send lag p99 ≈ 30.5 ms > 5 ms.
	if s.Valid || !strings.Contains(s.InvalidReason, "send lag p99 30.5") {
		t.Errorf("valid = %v (%q), want invalid for send lag", s.Valid, s.InvalidReason)
	}
	if s.ServerQueueMs != nil || s.NetworkMs != nil || s.ITLClientMinusServerMs != nil {
		t.Error("server timing figures without server timing")
	}
}

func TestSummarizeScaleEdges(t *testing.T) {
	// No request at all: counts zero, stats null, duration floored.
	empty := SummarizeScale(nil, ScaleOptions{})
	if empty.NumRequests != 0 || empty.SuccessRate != 0 || empty.DurationS != 1e-9 || empty.ReqPerS != 0 ||
		empty.TTFTMs.P99 != nil || !empty.Valid || empty.GoodputReqPerS != nil || empty.ErrorsByKind == nil {
		t.Errorf("empty: %+v", empty)
	}
	// Only errors: duration spans all requests (the original's fallback),
	// rates are zero, an unnamed kind is "unknown", goodput is zero.
	errs := []results.Request{failed(""), failed("timeout")}
	errs[1].StartS, errs[1].EndS = 4, 5
	s := SummarizeScale(errs, ScaleOptions{SLO: SLO{"e2e": 1e9}})
	if s.DurationS != 2 || s.ReqPerS != 0 || s.TokPerS != 0 || *s.GoodputReqPerS != 0 ||
		!reflect.DeepEqual(s.ErrorsByKind, map[string]int{"unknown": 1, "timeout": 1}) || s.E2EMs.N != 0 {
		t.Errorf("only errors: %+v", s)
	}
}

func TestValidity(t *testing.T) {
	lag := Summarize([]float64{0.5, 1, 4.5, 6}) // p99 = 5.955
	tests := []struct {
		threshold float64
		valid     bool
	}{
		{0, false}, // default 5 ms
		{6, true},  // above p99
		{5.9, false},
		{-1, true}, // rule disabled
	}
	for _, tt := range tests {
		if valid, reason := Validity(lag, tt.threshold); valid != tt.valid || (reason == "") != tt.valid {
			t.Errorf("threshold %v: valid %v (%q), want %v", tt.threshold, valid, reason, tt.valid)
		}
	}
	if valid, _ := Validity(results.Stats{}, 1); !valid {
		t.Error("no send lag samples: want valid")
	}
}

func TestParseSLO(t *testing.T) {
	tests := []struct {
		in   string
		want SLO
	}{
		{"", nil},
		{"ttft=200ms,tpot=50ms", SLO{"ttft": 200, "tpot": 50}},
		{" TTFT = 0.2s , e2e=1.5s", SLO{"ttft": 200, "e2e": 1500}},
		{"tpot=40", SLO{"tpot": 40}},
		{"ttft=500us", SLO{"ttft": 0.5}},
		{"ttft=250µs", SLO{"ttft": 0.25}},
		{"e2el=2s", SLO{"e2e": 2000}},
	}
	for _, tt := range tests {
		got, err := ParseSLO(tt.in)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseSLO(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"ttft", "itl=5ms", "ttft=-1ms", "ttft=0", "ttft=abc", "ttft=1ms,ttft=2ms", "ttft=200ms,"} {
		if got, err := ParseSLO(bad); err == nil {
			t.Errorf("ParseSLO(%q) = %v, want an error", bad, got)
		}
	}
	if got := (SLO{"ttft": 200, "tpot": 50}).String(); got != "tpot=50ms,ttft=200ms" {
		t.Errorf("String = %q", got)
	}
}

func TestSLOMeets(t *testing.T) {
	noToken := results.Request{StartS: 1, EndS: 1.5}
	tests := []struct {
		name string
		slo  SLO
		r    results.Request
		want bool
	}{
		{"meets ttft and tpot", SLO{"ttft": 125, "tpot": 46.875}, multiTokenChunks(), true},
		{"ttft just over", SLO{"ttft": 124.9}, multiTokenChunks(), false},
		{"tpot over", SLO{"tpot": 40}, multiTokenChunks(), false},
		{"e2e", SLO{"e2e": 750}, multiTokenChunks(), true},
		{"e2e over", SLO{"e2e": 749}, multiTokenChunks(), false},
		{"one token cannot break a tpot objective", SLO{"tpot": 1}, singleToken(), true},
		{"no first token breaks a ttft objective", SLO{"ttft": 1e9}, noToken, false},
		{"errors are never good", SLO{"e2e": 1e9}, failed("connect"), false},
		{"unknown metric refused", SLO{"itl": 1e9}, multiTokenChunks(), false},
	}
	for _, tt := range tests {
		if got := tt.slo.Meets(&tt.r); got != tt.want {
			t.Errorf("%s: Meets = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestServerTimingSplit(t *testing.T) {
	// Client: first chunk (1 token) at 250 ms, a 2-token chunk at 312.5 ms,
	// a last token at 500 ms. Server: scheduled at 62.5 ms, tokens at
	// 187.5, 218.75, 250 and 375 ms after arrival.
	r := results.Request{StartS: 1, ScheduledS: 1, EndS: 1.5,
		ChunkS: []float64{0.25, 0.3125, 0.5}, ChunkTokens: []int{1, 2, 1},
		ServerTiming: &results.ServerTiming{QueuedS: 0.0078125, FirstScheduledS: 0.0625,
			TokenS: []float64{0.1875, 0.21875, 0.25, 0.375}, FinishedS: 0.375}}
	network, queue, compute, ok := TTFTSplit(&r)
	if !ok || network != 0.0625 || queue != 0.0625 || compute != 0.125 || network+queue+compute != 0.25 {
		t.Errorf("split = %v %v %v (%v), want 0.0625 0.0625 0.125 adding up to TTFT 0.25", network, queue, compute, ok)
	}
	// Client per-token ITL 31.25, 31.25, 187.5 ms; server gaps 31.25, 31.25, 125 ms.
	if got := ITLClientMinusServer(&r); !reflect.DeepEqual(got, []float64{0, 0, 0.0625}) {
		t.Errorf("ITL client − server = %v, want [0 0 0.0625]", got)
	}
	s := SummarizeScale([]results.Request{r, singleToken()}, ScaleOptions{})
	if s.NetworkMs == nil || s.NetworkMs.N != 1 || *s.NetworkMs.P50 != 62.5 || *s.ServerQueueMs.Max != 62.5 ||
		*s.ServerComputeMs.Mean != 125 || s.ITLClientMinusServerMs.N != 3 || *s.ITLClientMinusServerMs.Max != 62.5 {
		t.Errorf("summary server timing: network %v queue %v compute %v itl diff %v",
			s.NetworkMs, s.ServerQueueMs, s.ServerComputeMs, s.ITLClientMinusServerMs)
	}

	short := r
	short.ServerTiming = &results.ServerTiming{FirstScheduledS: 0.0625, TokenS: []float64{0.1875, 0.21875}}
	if got := ITLClientMinusServer(&short); got != nil {
		t.Errorf("server counted 2 tokens, client 4: got %v, want nil", got)
	}
	none := singleToken()
	if _, _, _, ok := TTFTSplit(&none); ok {
		t.Error("split without server timing")
	}
}

// Attainment divides by every request sent: the error counts against it.
func TestSLOAttainment(t *testing.T) {
	reqs := []results.Request{multiTokenChunks(), singleToken(), failed("connect"), singleToken()}
	slo := SLO{"ttft": 100} // TTFT 125 ms fails, 62.5 ms meets
	if got := slo.Attainment(reqs); got != 0.5 {
		t.Errorf("Attainment = %v, want 2/4", got)
	}
	if got := slo.Attainment(nil); got != 0 {
		t.Errorf("Attainment(no requests) = %v, want 0", got)
	}
	s := SummarizeScale(reqs, ScaleOptions{SLO: slo})
	if s.SLOAttainment == nil || *s.SLOAttainment != 0.5 {
		t.Errorf("summary slo_attainment = %v, want 0.5", s.SLOAttainment)
	}
	if s := SummarizeScale(reqs, ScaleOptions{}); s.SLOAttainment != nil {
		t.Errorf("slo_attainment without an SLO = %v, want null", *s.SLOAttainment)
	}
}
