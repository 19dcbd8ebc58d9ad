package metrics

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/results"
)

// t975 returns NumPy's reference t_{0.975, df} from the fixture.
func t975(t *testing.T, df int) float64 {
	t.Helper()
	for _, c := range loadNumpy(t).T975 {
		if c.DF == df {
			return c.T
		}
	}
	t.Fatalf("no fixture for df %d", df)
	return 0
}

func TestSpreadOf(t *testing.T) {
	if sp := SpreadOf(nil); sp.Rounds != 0 || sp.Mean != nil || sp.CILow != nil {
		t.Errorf("no rounds: %+v", sp)
	}
	if sp := SpreadOf([]float64{5}); sp.Rounds != 1 || *sp.Mean != 5 || sp.CILow != nil || sp.CIHigh != nil {
		t.Errorf("one round: %+v", sp)
	}
	// 1, 2, 3: mean 2, sample sd 1, half-width t_{0.975,2} / √3.
	sp := SpreadOf([]float64{1, 2, 3})
	half := t975(t, 2) / math.Sqrt(3)
	if sp.Rounds != 3 || *sp.Mean != 2 || math.Abs(*sp.CILow-(2-half)) > 1e-12 || math.Abs(*sp.CIHigh-(2+half)) > 1e-12 {
		t.Errorf("spread = %v [%v, %v], want 2 ± %v", *sp.Mean, *sp.CILow, *sp.CIHigh, half)
	}
	if sp := SpreadOf([]float64{4, 4, 4, 4}); *sp.CILow != 4 || *sp.CIHigh != 4 {
		t.Errorf("no variation: [%v, %v]", *sp.CILow, *sp.CIHigh)
	}
}

func TestSummarizeRounds(t *testing.T) {
	round1 := scaleFixture() // duration 2.25 s, 3 ok of 4, send lag p99 over 5 ms
	round2 := []results.Request{multiTokenChunks(), singleToken()}
	round2[0].ChunkS = []float64{0.0625, 0.25, 0.5} // TTFT 62.5 ms this time
	opts := ScaleOptions{Backend: "roseinfer", Scale: 0.8, SLO: SLO{"ttft": 100}}
	agg := SummarizeRounds([][]results.Request{round1, round2}, opts)

	r1, r2 := SummarizeScale(round1, withRound(opts, 1)), SummarizeScale(round2, withRound(opts, 2))
	if !reflect.DeepEqual(agg.Rounds, []results.Summary{r1, r2}) {
		t.Error("per-round summaries differ from SummarizeScale of each round")
	}
	// Round 2 spans 0.5 s .. 2.75 s too.
	dur := r1.DurationS + r2.DurationS
	if agg.Round != 0 || agg.NumRequests != 6 || agg.NumSuccess != 5 || agg.DurationS != 4.5 || dur != 4.5 ||
		agg.ReqPerS != 5/dur || agg.TokPerS != float64(14+10)/dur {
		t.Errorf("aggregate counts: round %d n %d ok %d duration %v req/s %v tok/s %v",
			agg.Round, agg.NumRequests, agg.NumSuccess, agg.DurationS, agg.ReqPerS, agg.TokPerS)
	}
	// Good (TTFT ≤ 100 ms): round 1's single token; round 2's both.
	if *agg.GoodputReqPerS != 3/dur {
		t.Errorf("goodput = %v, want %v", *agg.GoodputReqPerS, 3/dur)
	}
	// Latency statistics pool the rounds' samples.
	if want := Summarize([]float64{250, 125, 62.5, 62.5, 62.5}); !reflect.DeepEqual(agg.TTFTMs, want) {
		t.Errorf("pooled TTFT %s, want %s", show(agg.TTFTMs), show(want))
	}
	if agg.Valid || !strings.HasPrefix(agg.InvalidReason, "round 1: send lag p99") {
		t.Errorf("valid %v (%q): round 1 fell behind", agg.Valid, agg.InvalidReason)
	}
	p50 := agg.Spread["ttft_ms.p50"]
	if want := SpreadOf([]float64{*r1.TTFTMs.P50, *r2.TTFTMs.P50}); !reflect.DeepEqual(p50, want) || p50.Rounds != 2 {
		t.Errorf("spread of TTFT p50 = %+v, want %+v", p50, want)
	}
	for _, key := range []string{"req_per_s", "tok_per_s", "goodput_req_per_s", "success_rate", "send_lag_ms.p99",
		"ttft_ms.mean", "ttft_ms.p99", "tpot_ms.p90", "itl_ms.p99", "e2e_ms.p50"} {
		if _, ok := agg.Spread[key]; !ok {
			t.Errorf("spread lacks %s", key)
		}
	}

	one := SummarizeRounds([][]results.Request{round1}, withRound(opts, 7))
	if !reflect.DeepEqual(one, SummarizeScale(round1, opts)) {
		t.Error("one round should be the plain summary (round 0, no spread)")
	}
	noSLO := SummarizeRounds([][]results.Request{round1, round2}, ScaleOptions{})
	if _, ok := noSLO.Spread["goodput_req_per_s"]; ok || noSLO.GoodputReqPerS != nil {
		t.Error("goodput without an SLO")
	}
}

func withRound(o ScaleOptions, round int) ScaleOptions {
	o.Round = round
	return o
}

func TestOffline(t *testing.T) {
	// 128 prompts × 256 tokens → 64 tokens each, in 2 s.
	req, out, total := OfflineThroughput(128, 128*256, 128*64, 2)
	if req != 64 || out != 4096 || total != 20480 {
		t.Errorf("throughput = %v %v %v, want 64 4096 20480", req, out, total)
	}
	if req, _, _ := OfflineThroughput(1, 1, 1, 0); math.Abs(req-1e9) > 1 {
		t.Errorf("zero time: req/s %v, want the 1e-9 s floor", req)
	}
	r := results.OfflineResult{NumPrompts: 8, TotalInputTokens: 80, TotalOutputTokens: 40, TotalS: 0.5}
	FillOffline(&r)
	if r.RequestThroughputRPS != 16 || r.OutputThroughputTPS != 80 || r.TotalThroughputTPS != 240 {
		t.Errorf("FillOffline: %+v", r)
	}
}

func TestSummarizeOfflineRounds(t *testing.T) {
	pf := func(v float64) *float64 { return &v }
	mk := func(totalS float64, outTokens int, prefill *float64) results.OfflineResult {
		r := results.OfflineResult{Backend: "roseinfer", NumPrompts: 8, InputLen: 10, OutputLen: 5,
			TotalInputTokens: 80, TotalOutputTokens: outTokens, TotalS: totalS, PrefillS: prefill, DecodeS: prefill}
		FillOffline(&r)
		return r
	}
	rounds := []results.OfflineResult{mk(0.5, 40, pf(0.125)), mk(1.5, 40, pf(0.375))}
	agg := SummarizeOfflineRounds(rounds)
	if agg.Round != 0 || agg.NumPrompts != 8 || agg.TotalInputTokens != 80 || agg.TotalOutputTokens != 40 || agg.TotalS != 1 ||
		*agg.PrefillS != 0.25 || agg.RequestThroughputRPS != 8 || agg.OutputThroughputTPS != 40 || agg.TotalThroughputTPS != 120 {
		t.Errorf("aggregate: %+v", agg)
	}
	if len(agg.Rounds) != 2 || agg.Rounds[0].Round != 1 || agg.Rounds[1].Round != 2 || agg.Rounds[1].TotalS != 1.5 {
		t.Errorf("rounds: %+v", agg.Rounds)
	}
	// Per-round req/s 16 and 16/3.
	if sp := agg.Spread["request_throughput_rps"]; sp.Rounds != 2 || math.Abs(*sp.Mean-(16+16.0/3)/2) > 1e-12 {
		t.Errorf("req/s spread %+v", sp)
	}
	for _, key := range []string{"output_throughput_tps", "total_throughput_tps", "total_s"} {
		if _, ok := agg.Spread[key]; !ok {
			t.Errorf("spread lacks %s", key)
		}
	}
	if rounds[0].Round != 0 {
		t.Error("SummarizeOfflineRounds modified its input")
	}
	mixed := SummarizeOfflineRounds([]results.OfflineResult{mk(1, 40, nil), mk(1, 40, pf(1))})
	if mixed.PrefillS != nil || mixed.DecodeS != nil {
		t.Error("prefill/decode averaged although a round lacks them")
	}
	if one := SummarizeOfflineRounds(rounds[:1]); !reflect.DeepEqual(one, rounds[0]) {
		t.Error("one round should come back unchanged")
	}
}
