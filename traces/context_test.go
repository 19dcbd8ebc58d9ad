package traces

import (
	"math"
	"reflect"
	"testing"
)

// Worked examples of the original harness's length rules, each computed by
// hand from the rules quoted on Context.Clamp.
func TestContextClamp(t *testing.T) {
	gpt2 := Context{ModelMaxLen: 1024, OverheadTokens: 8, MaxOutputLen: 128}
	tests := []struct {
		name            string
		ctx             Context
		server, eff     int
		in, out         int
		wantIn, wantOut int
	}{
		// effective = max(2, 1024 − 8 − 1) = 1015
		{"fits as is", gpt2, 1024, 1015, 374, 44, 374, 44},
		{"output clamped to max_output_len, input to the rest", gpt2, 1024, 1015, 2000, 500, 887, 128},
		{"exactly the budget", gpt2, 1024, 1015, 887, 128, 887, 128},
		{"zero lengths become 1", gpt2, 1024, 1015, 0, 0, 1, 1},
		{"no max_output_len: output limited to effective − 1", Context{ModelMaxLen: 1024, OverheadTokens: 8}, 1024, 1015, 5000, 5000, 1, 1014},
		{"max_input_len after context fitting", Context{ModelMaxLen: 1024, OverheadTokens: 8, MaxInputLen: 100, MaxOutputLen: 1000}, 1024, 1015, 5000, 50, 100, 50},
		// both maxima set: server context = min(1024, 100 + 20 + 8 + 1) = 129, effective = 120
		{"both maxima shrink the context", Context{ModelMaxLen: 1024, OverheadTokens: 8, MaxInputLen: 100, MaxOutputLen: 20}, 129, 120, 500, 500, 100, 20},
		{"shrink never grows the context", Context{ModelMaxLen: 64, OverheadTokens: 8, MaxInputLen: 100, MaxOutputLen: 20}, 64, 55, 500, 500, 35, 20},
		// effective = max(2, 5 − 8 − 1) = 2
		{"tiny context", Context{ModelMaxLen: 5, OverheadTokens: 8}, 5, 2, 10, 10, 1, 1},
		// a negative overhead counts as 0: effective = 1023
		{"negative overhead", Context{ModelMaxLen: 1024, OverheadTokens: -3}, 1024, 1023, 2000, 10, 1013, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.ctx.ServerMaxLen(); got != tt.server {
				t.Errorf("ServerMaxLen = %d, want %d", got, tt.server)
			}
			if got := tt.ctx.Effective(); got != tt.eff {
				t.Errorf("Effective = %d, want %d", got, tt.eff)
			}
			in, out := tt.ctx.Clamp(tt.in, tt.out)
			if in != tt.wantIn || out != tt.wantOut {
				t.Errorf("Clamp(%d, %d) = (%d, %d), want (%d, %d)", tt.in, tt.out, in, out, tt.wantIn, tt.wantOut)
			}
		})
	}
}

func TestClampRowsAndWarmup(t *testing.T) {
	ctx := Context{ModelMaxLen: 1024, OverheadTokens: 8, MaxOutputLen: 128}
	rows := []Row{{Index: 3, TimestampS: 1, InputLen: 2000, OutputLen: 500, HashIDs: []int64{7}}}
	got, err := ctx.ClampRows(rows)
	if err != nil {
		t.Fatal(err)
	}
	want := []Row{{Index: 3, TimestampS: 1, InputLen: 887, OutputLen: 128, HashIDs: []int64{7}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ClampRows = %+v, want %+v", got, want)
	}
	if rows[0].InputLen != 2000 {
		t.Error("ClampRows modified its input")
	}
	if _, err := (Context{}).ClampRows(rows); err == nil {
		t.Error("zero model context: no error")
	}
	// C.6 defaults: warmup 128 in / 32 out fit; a long warmup is cut to 1015 − 32.
	if got := ctx.WarmupInputLen(128, 32); got != 128 {
		t.Errorf("WarmupInputLen(128, 32) = %d", got)
	}
	if got := ctx.WarmupInputLen(4000, 32); got != 983 {
		t.Errorf("WarmupInputLen(4000, 32) = %d, want 983", got)
	}
	if got := ctx.WarmupInputLen(4000, 5000); got != 1 {
		t.Errorf("WarmupInputLen(4000, 5000) = %d, want 1", got)
	}
}

func TestSchedule(t *testing.T) {
	rows := []Row{{TimestampS: 100}, {TimestampS: 100.5}, {TimestampS: 103}}
	got, err := Schedule(rows, 0.4, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{1, 1.2, 2.2}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Errorf("t[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	// The minimum need not be the first row.
	got, _ = Schedule([]Row{{TimestampS: 5}, {TimestampS: 3}}, 2, 0)
	if got[0] != 4 || got[1] != 0 {
		t.Errorf("unsorted rows: %v, want [4 0]", got)
	}
	for _, scale := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if _, err := Schedule(rows, scale, 0); err == nil {
			t.Errorf("scale %v: no error", scale)
		}
	}
	if _, err := Schedule(rows, 1, math.NaN()); err == nil {
		t.Error("NaN offset: no error")
	}
}

// Replaying the bundled default at scale 1 spans the trace's 3 501.7 s.
func TestScheduleDefaultTrace(t *testing.T) {
	tr, err := LoadDefault(Options{})
	if err != nil {
		t.Fatal(err)
	}
	at, err := Schedule(tr.Rows, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	// 19:14:08.4025270 − 18:15:46.6805900 = 3501.7219370 s, plus the 1 s offset.
	if last := at[len(at)-1]; math.Abs(last-3502.721937) > 1e-6 || at[0] != 1 {
		t.Errorf("schedule spans %v .. %v, want 1 .. 3502.721937", at[0], last)
	}
}
