package timeline

import (
	"reflect"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/results"
)

func f64(v float64) *float64 { return &v }

// roundSteps are a round's steps on its clock (s): a mixed step with a
// 512-token prefill chunk, a prefill-only step, a slow decode step, ten
// ordinary decodes, a long idle stretch, and one more decode.
func roundSteps() *Steps {
	s := []Step{
		{Num: 1, StartS: 0, EndS: 0.002, NumSeqs: 2, DecodeRows: 2},
		{Num: 2, StartS: 0.002, EndS: 0.034, NumSeqs: 3, PrefillTokens: 512, DecodeRows: 2},
		{Num: 3, StartS: 0.034, EndS: 0.036, NumSeqs: 3, DecodeRows: 3},
		{Num: 4, StartS: 0.036, EndS: 0.060, NumSeqs: 1, PrefillTokens: 300},
		{Num: 5, StartS: 0.060, EndS: 0.062, NumSeqs: 3, DecodeRows: 3},
		{Num: 6, StartS: 0.062, EndS: 0.082, NumSeqs: 8, DecodeRows: 8, Exec: "graph"},
	}
	for i := range 10 {
		t0 := 0.082 + 0.002*float64(i)
		s = append(s, Step{Num: int64(7 + i), StartS: t0, EndS: t0 + 0.002, NumSeqs: 2, DecodeRows: 2})
	}
	s = append(s, Step{Num: 17, StartS: 0.200, EndS: 0.202, NumSeqs: 1, DecodeRows: 1})
	return &Steps{Steps: s, CoverFromS: -0.001, CoverS: 0.3}
}

// req is a successful request sent at 0 whose one-token chunks arrived at
// these round times.
func req(at ...float64) results.Request {
	r := results.Request{}
	for _, a := range at {
		r.ChunkS = append(r.ChunkS, a)
		r.ChunkTokens = append(r.ChunkTokens, 1)
	}
	return r
}

func TestAttribute(t *testing.T) {
	// The engine was late (its own gap matches the client's): the steps decide.
	engineLate := req(0.0021, 0.0342)
	engineLate.ServerTiming = &results.ServerTiming{TokenS: []float64{0.001, 0.0330}}
	// The engine emitted on time (2 ms apart); the client saw 30 ms.
	delivered := req(0.120, 0.150)
	delivered.ServerTiming = &results.ServerTiming{TokenS: []float64{0.010, 0.012}}
	// Three tokens emitted 2 ms apart waited in the server and came as one
	// chunk 36 ms after the previous: 12 ms a token, all of it delivery.
	coalesced := results.Request{ChunkS: []float64{0.140, 0.176}, ChunkTokens: []int{1, 3},
		ServerTiming: &results.ServerTiming{TokenS: []float64{0.100, 0.102, 0.104, 0.106}}}
	msg := "broken"
	failed := req(0.0021, 0.0342)
	failed.Error = &msg
	reqs := []results.Request{
		req(0.0021, 0.0342),        // 0: in step 2's gap
		req(0.0342, 0.0602),        // 1: sat out step 4 (prefill only)
		req(0.0622, 0.0822),        // 2: step 6, a slow decode
		req(0.0822, 0.1022),        // 3: ten 2 ms steps
		req(0.1022, 0.2022),        // 4: the engine was idle
		engineLate,                 // 5
		delivered,                  // 6
		coalesced,                  // 7
		req(0.290, 0.320),          // 8: past the trace's end
		req(0.010, 0.012, 0.014),   // 9: no outlier
		failed,                     // 10: not in the summary, not an outlier
		req(0.0021, 0.0031, 0.004), // 11: no outlier
	}
	itl := results.Stats{P50: f64(2), P99: f64(10)}
	type want struct {
		req      int
		cause    string
		step     int64
		whyParts []string
	}
	wants := []want{
		{0, CausePrefillInStep, 2, []string{"prefill chunk of 512 tokens in the same step", "step 2", "32.00 ms"}},
		{1, CausePrefillStep, 4, []string{"prefill-only step of 300 tokens"}},
		{2, CauseDecodeStep, 6, []string{"decode step of 8 rows", "graph"}},
		{3, CauseSeveralSteps, 8, []string{"10 steps ran in the gap"}}, // step 7 began before the gap
		{4, CauseEngineIdle, 0, []string{"the engine ran steps for"}},
		{5, CausePrefillInStep, 2, nil},
		{6, CauseDelivery, 0, []string{"emitted the token 2.00 ms after", "28.00 ms"}},
		{7, CauseDelivery, 0, []string{"chunk's 3 tokens 6.00 ms after", "(2.00 ms a token)"}},
		{8, CauseNoServerTrace, 0, nil},
	}
	got := Attribute(reqs, itl, roundSteps())
	if len(got) != len(wants) {
		t.Fatalf("%d outliers, want %d: %+v", len(got), len(wants), got)
	}
	for i, w := range wants {
		a := got[i]
		var step int64
		if a.Step != nil {
			step = a.Step.Num
		}
		if a.Request != w.req || a.Cause != w.cause || step != w.step {
			t.Errorf("outlier %d: request %d, cause %s, step %d (%s); want request %d, %s, step %d", i, a.Request,
				a.Cause, step, a.Why, w.req, w.cause, w.step)
		}
		for _, part := range w.whyParts {
			if !strings.Contains(a.Why, part) {
				t.Errorf("outlier %d: why %q lacks %q", i, a.Why, part)
			}
		}
	}
	// The gap is on the round's clock: the request's send time plus chunk times.
	shifted := []results.Request{req(0.0021-0.5, 0.0342-0.5)}
	shifted[0].StartS = 0.5
	if a := Attribute(shifted, itl, roundSteps()); len(a) != 1 || a[0].Cause != CausePrefillInStep || !near(a[0].GapStartS, 0.0021) {
		t.Errorf("a request sent at 0.5 s: %+v", a)
	}

	counts := Count(got, itl.P99)
	wantCounts := &results.ITLOutliers{ThresholdMs: f64(10), N: 9, ByCause: map[string]int{CausePrefillInStep: 2,
		CausePrefillStep: 1, CauseDecodeStep: 1, CauseSeveralSteps: 1, CauseEngineIdle: 1, CauseDelivery: 2,
		CauseNoServerTrace: 1}}
	if !reflect.DeepEqual(counts, wantCounts) {
		t.Errorf("counts %+v, want %+v", counts, wantCounts)
	}
	if s := CauseList(counts.ByCause); !strings.HasPrefix(s, "prefill_in_step 2, prefill_step 1, decode_step 1") {
		t.Errorf("cause list %q", s)
	}
}

// TestAttributeWithoutSteps: a round without a server trace still finds its
// outliers (and, with server timing, the delivery ones); the rest have no
// step to go to.
func TestAttributeWithoutSteps(t *testing.T) {
	delivered := req(0.120, 0.150)
	delivered.ServerTiming = &results.ServerTiming{TokenS: []float64{0.010, 0.012}}
	reqs := []results.Request{req(0.0021, 0.0342), delivered}
	got := Count(Attribute(reqs, results.Stats{P50: f64(2), P99: f64(10)}, nil), f64(10))
	if got.N != 2 || got.ByCause[CauseNoServerTrace] != 1 || got.ByCause[CauseDelivery] != 1 {
		t.Errorf("counts %+v", got)
	}
	if a := Attribute(reqs, results.Stats{}, nil); a != nil {
		t.Errorf("no ITL p99, yet outliers %+v", a)
	}
	// Server timing that counts other tokens than the client is not used.
	delivered.ServerTiming.TokenS = append(delivered.ServerTiming.TokenS, 0.014)
	if a := Attribute([]results.Request{delivered}, results.Stats{P99: f64(10)}, nil); len(a) != 1 || a[0].ServerGapS != nil {
		t.Errorf("mismatched server timing used: %+v", a)
	}
}

func TestSum(t *testing.T) {
	one := &results.ITLOutliers{ThresholdMs: f64(3), N: 2, ByCause: map[string]int{CauseDelivery: 2}}
	two := &results.ITLOutliers{ThresholdMs: f64(4), N: 3, ByCause: map[string]int{CauseDelivery: 1, CauseDecodeStep: 2}}
	if got := Sum([]*results.ITLOutliers{one}); got != one {
		t.Errorf("one round: %+v, want the round's own counts", got)
	}
	want := &results.ITLOutliers{N: 5, ByCause: map[string]int{CauseDelivery: 3, CauseDecodeStep: 2}}
	if got := Sum([]*results.ITLOutliers{one, nil, two}); !reflect.DeepEqual(got, want) {
		t.Errorf("sum %+v, want %+v", got, want)
	}
	if got := Sum([]*results.ITLOutliers{nil, nil}); got != nil {
		t.Errorf("no counts: %+v", got)
	}
}
