package timeline

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	engineprofile "github.com/roseinfer/roseinfer/engine/profile"
	"github.com/roseinfer/roseinfer/engine/profile/phase"
)

func ms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// overlapCapture is what roseinfer's recorder captures of an engine with
// overlap scheduling: each loop iteration submits step k (forward) and then
// waits for and emits step k−1. Step 1 is a 512-token prefill, submitted
// before the capture began (its forward is missing); step 2 a mixed step
// whose device says it ran eagerly; steps 3 and 4 decodes; step 5 was
// submitted but never collected before the capture stopped.
func overlapCapture() *engineprofile.Capture {
	b := func(step int64, seqs, prefill, decode int) phase.Batch {
		return phase.Batch{Step: step, NumSeqs: seqs, NumPrefillTokens: prefill, NumDecodeSeqs: decode}
	}
	span := func(p phase.Phase, name string, start, dur float64, batch phase.Batch) engineprofile.Span {
		return engineprofile.Span{Name: name, Phase: p, Start: ms(start), Dur: ms(dur), Batch: batch}
	}
	s1, s2, s3, s4, s5 := b(1, 1, 512, 0), b(2, 2, 256, 1), b(3, 2, 0, 2), b(4, 2, 0, 2), b(5, 2, 0, 2)
	spans := []engineprofile.Span{
		span(phase.Forward, "forward/mixed", 1, 0.1, s2),
		span(phase.Wait, "wait", 1.1, 3.9, s1),
		span(phase.Emit, "emit", 5, 0.2, s1),
		span(phase.Forward, "forward/decode", 5.3, 0.1, s3),
		span(phase.Wait, "wait", 5.4, 14.6, s2),
		span(phase.Emit, "emit", 20, 0.2, s2),
		{Name: "mixed", Phase: phase.Forward, Track: engineprofile.TrackDeviceGPU, Start: ms(5), Dur: ms(14.9), Batch: s2},
		span(phase.Forward, "forward/decode", 20.3, 0.1, s4),
		span(phase.Wait, "wait", 20.4, 1.6, s3),
		span(phase.Emit, "emit", 22, 0.2, s3),
		// The engine went idle; step 4 ended and, later, step 5 was submitted.
		span(phase.Emit, "emit", 24, 0.2, s4),
		span(phase.Forward, "forward/decode", 30, 0.1, s5),
	}
	return &engineprofile.Capture{Origin: time.Date(2026, 1, 2, 3, 4, 5, 600_000_000, time.UTC), Duration: ms(31),
		Spans: spans, NumSteps: 5}
}

func writeCapture(t *testing.T, c *engineprofile.Capture) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "trace.json")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := engineprofile.WriteChromeTrace(f, c, map[string]string{"device": "test"}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReadServerTrace reads what roseinfer's own trace writer writes and
// assembles its steps: a step starts when the device could start it (its
// submit, or the previous step's end if later) and ends when it is emitted.
func TestReadServerTrace(t *testing.T) {
	tr, err := ReadServerTrace(writeCapture(t, overlapCapture()))
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Origin.Equal(time.Date(2026, 1, 2, 3, 4, 5, 600_000_000, time.UTC)) || tr.DurationS != 0.031 || tr.Truncated {
		t.Errorf("origin %v, duration %v, truncated %v", tr.Origin, tr.DurationS, tr.Truncated)
	}
	if tr.Threads[1] != "engine loop" || len(tr.Spans) != 12 {
		t.Errorf("threads %v, %d spans", tr.Threads, len(tr.Spans))
	}
	// Step 1's start is unknown (submitted before the capture), step 5 was
	// never emitted: neither is a step.
	want := []Step{
		{Num: 2, StartS: 0.005, EndS: 0.020, NumSeqs: 2, PrefillTokens: 256, DecodeRows: 1, Exec: "eager"},
		{Num: 3, StartS: 0.020, EndS: 0.022, NumSeqs: 2, DecodeRows: 2},
		{Num: 4, StartS: 0.022, EndS: 0.024, NumSeqs: 2, DecodeRows: 2},
	}
	if len(tr.Steps) != len(want) {
		t.Fatalf("steps %+v, want %+v", tr.Steps, want)
	}
	for i := range want {
		got := tr.Steps[i]
		// Times went through µs with nanosecond decimals: compare to 1 ns.
		if got.Num != want[i].Num || !near(got.StartS, want[i].StartS) || !near(got.EndS, want[i].EndS) ||
			got.NumSeqs != want[i].NumSeqs || got.PrefillTokens != want[i].PrefillTokens ||
			got.DecodeRows != want[i].DecodeRows || got.Exec != want[i].Exec {
			t.Errorf("step %d: %+v, want %+v", i, got, want[i])
		}
	}
	if k := tr.Steps[0].Kind(); k != "mixed" {
		t.Errorf("step 2 kind %q", k)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func TestReadServerTraceErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, body, want string }{
		{"not json", `{"traceEvents":[`, "not a Chrome trace"},
		{"no origin", `{"traceEvents":[],"otherData":{"duration_s":1}}`, "otherData.origin is missing"},
		{"bad origin", `{"traceEvents":[],"otherData":{"origin":"yesterday","duration_s":1}}`, `otherData.origin "yesterday"`},
		{"no duration", `{"traceEvents":[],"otherData":{"origin":"2026-01-02T03:04:05Z"}}`, "duration_s is missing"},
		{"negative dur", `{"traceEvents":[{"name":"m","ph":"M","args":{"name":"x"}},{"name":"emit","ph":"X","ts":1,"dur":-1}],` +
			`"otherData":{"origin":"2026-01-02T03:04:05Z","duration_s":1}}`, `traceEvents[1] ("emit")`},
		{"no ts", `{"traceEvents":[{"name":"emit","ph":"X","dur":1}],"otherData":{"origin":"2026-01-02T03:04:05Z","duration_s":1}}`,
			`traceEvents[0] ("emit"): ts and a non-negative dur are required`},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".json")
		if err := os.WriteFile(path, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReadServerTrace(path)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %v, want one naming %s and %q", tc.name, err, path, tc.want)
		}
	}
	if _, err := ReadServerTrace(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("a missing file read without error")
	}
}

// TestOnClock moves steps onto a round's clock; a truncated trace covers
// only up to its last step.
func TestOnClock(t *testing.T) {
	tr := &ServerTrace{DurationS: 10, Steps: []Step{{Num: 1, StartS: 1, EndS: 2}, {Num: 2, StartS: 2, EndS: 3}}}
	s := OnClock(tr, Clock{OriginS: -0.5})
	want := &Steps{Steps: []Step{{Num: 1, StartS: 0.5, EndS: 1.5}, {Num: 2, StartS: 1.5, EndS: 2.5}}, CoverFromS: -0.5, CoverS: 9.5}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("got %+v, want %+v", s, want)
	}
	if tr.Steps[0].StartS != 1 {
		t.Error("OnClock changed the trace's own steps")
	}
	tr.Truncated = true
	if s := OnClock(tr, Clock{OriginS: -0.5}); s.CoverS != 2.5 {
		t.Errorf("truncated trace covers up to %v, want its last step's end 2.5", s.CoverS)
	}
}
