package profile

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/roseinfer/roseinfer/engine/profile/phase"
)

// fakeDevice reports one GPU span per Forward while enabled.
type fakeDevice struct {
	isOn     bool
	toggles  []bool
	numCalls int
}

func (d *fakeDevice) EnableSpans(on bool) { d.isOn = on; d.toggles = append(d.toggles, on) }

func (d *fakeDevice) AppendSpans(dst []phase.DeviceSpan) []phase.DeviceSpan {
	d.numCalls++
	return append(dst,
		phase.DeviceSpan{Name: "decode", Start: 10 * time.Microsecond, Dur: 50 * time.Microsecond, OnGPU: true},
		phase.DeviceSpan{Name: "sample", Start: 60 * time.Microsecond, Dur: 5 * time.Microsecond, OnGPU: true})
}

// runSteps drives obs the way the engine loop does: step > schedule,
// forward, emit.
func runSteps(obs phase.Observer, first int64, n int, b phase.Batch) {
	for i := range n {
		b := b
		b.Step = first + int64(i)
		counts := b
		b.NumSeqs, b.NumPrefillTokens, b.NumDecodeSeqs = 0, 0, 0
		obs.Begin(phase.Step, &b)
		obs.Begin(phase.Schedule, &b)
		b.NumSeqs, b.NumPrefillTokens, b.NumDecodeSeqs = counts.NumSeqs, counts.NumPrefillTokens, counts.NumDecodeSeqs
		obs.End(phase.Schedule, &b)
		obs.Begin(phase.Forward, &b)
		obs.End(phase.Forward, &b)
		obs.Begin(phase.Emit, &b)
		obs.End(phase.Emit, &b)
		obs.End(phase.Step, &b)
	}
}

func TestRecorderWindows(t *testing.T) {
	decode := phase.Batch{NumSeqs: 3, NumDecodeSeqs: 3}
	cases := []struct {
		name      string
		win       Window
		numSteps  int
		wantSteps []int64 // steps recorded
	}{
		{"all steps", Window{}, 4, []int64{1, 2, 3, 4}},
		{"delay 2", Window{DelaySteps: 2}, 4, []int64{3, 4}},
		{"delay 1, two steps", Window{DelaySteps: 1, NumSteps: 2}, 5, []int64{2, 3}},
		{"window past the end", Window{DelaySteps: 9}, 3, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRecorder(0)
			runSteps(r, 1, 2, decode) // before Start: nothing kept
			r.Start(tc.win)
			runSteps(r, 1, tc.numSteps, decode)
			c := r.Stop()
			runSteps(r, 100, 2, decode) // after Stop: nothing kept
			if c.NumSteps != int64(len(tc.wantSteps)) {
				t.Errorf("NumSteps = %d, want %d", c.NumSteps, len(tc.wantSteps))
			}
			var gotSteps []int64
			for _, s := range c.Spans {
				if s.Name == "step" {
					gotSteps = append(gotSteps, s.Batch.Step)
				}
			}
			if !slices.Equal(gotSteps, tc.wantSteps) {
				t.Errorf("recorded steps %v, want %v", gotSteps, tc.wantSteps)
			}
			if len(c.Spans) != 4*len(tc.wantSteps) {
				t.Errorf("%d spans, want 4 per step", len(c.Spans))
			}
		})
	}
}

func TestRecorderSpanNamesAndNesting(t *testing.T) {
	cases := []struct {
		batch phase.Batch
		want  string
	}{
		{phase.Batch{NumSeqs: 2, NumPrefillTokens: 100}, "forward/prefill"},
		{phase.Batch{NumSeqs: 4, NumDecodeSeqs: 4}, "forward/decode"},
		{phase.Batch{NumSeqs: 5, NumPrefillTokens: 64, NumDecodeSeqs: 4}, "forward/mixed"},
	}
	for _, tc := range cases {
		r := NewRecorder(0)
		r.Start(Window{})
		runSteps(r, 7, 1, tc.batch)
		c := r.Stop()
		names := map[string]Span{}
		for _, s := range c.Spans {
			names[s.Name] = s
		}
		fwd, ok := names[tc.want]
		if !ok {
			t.Fatalf("%+v: no %q span in %v", tc.batch, tc.want, c.Spans)
		}
		if fwd.Batch != (phase.Batch{Step: 7, NumSeqs: tc.batch.NumSeqs, NumPrefillTokens: tc.batch.NumPrefillTokens,
			NumDecodeSeqs: tc.batch.NumDecodeSeqs}) {
			t.Errorf("forward span batch %+v", fwd.Batch)
		}
		step := names["step"]
		for _, s := range c.Spans {
			if s.Start < step.Start || s.Start+s.Dur > step.Start+step.Dur {
				t.Errorf("span %s [%v, %v] outside its step [%v, %v]", s.Name, s.Start, s.Start+s.Dur, step.Start, step.Start+step.Dur)
			}
		}
		sched, emit := names["schedule"], names["emit"]
		if !(sched.Start <= fwd.Start && fwd.Start+fwd.Dur <= emit.Start) {
			t.Errorf("phases out of order: schedule %v, forward %v, emit %v", sched.Start, fwd.Start, emit.Start)
		}
	}
}

func TestRecorderDeviceSpans(t *testing.T) {
	dev := &fakeDevice{}
	r := NewRecorder(0)
	r.ObserveDevice(dev)
	runSteps(r, 1, 1, phase.Batch{NumSeqs: 1, NumDecodeSeqs: 1})
	if dev.numCalls != 0 || len(dev.toggles) != 0 {
		t.Fatalf("device asked while idle: %d calls, toggles %v", dev.numCalls, dev.toggles)
	}
	r.Start(Window{})
	runSteps(r, 2, 2, phase.Batch{NumSeqs: 1, NumDecodeSeqs: 1})
	c := r.Stop()
	runSteps(r, 4, 1, phase.Batch{NumSeqs: 1, NumDecodeSeqs: 1})
	if dev.isOn || len(dev.toggles) != 2 {
		t.Errorf("device spans should be on during the capture only: toggles %v", dev.toggles)
	}
	if !c.DeviceReports {
		t.Error("DeviceReports false")
	}
	var gpu []Span
	var fwd []Span
	for _, s := range c.Spans {
		if s.Track == TrackDeviceGPU {
			gpu = append(gpu, s)
		}
		if s.Phase == phase.Forward && s.Track == TrackEngine {
			fwd = append(fwd, s)
		}
	}
	if len(gpu) != 4 {
		t.Fatalf("%d GPU spans, want 2 per step", len(gpu))
	}
	if gpu[0].Name != "decode" || gpu[1].Name != "sample" || gpu[1].Dur != 5*time.Microsecond {
		t.Errorf("GPU spans %+v", gpu[:2])
	}
	if gpu[0].Start != fwd[0].Start+10*time.Microsecond {
		t.Errorf("GPU span starts at %v, want forward start %v + 10µs", gpu[0].Start, fwd[0].Start)
	}
}

func TestRecorderTruncates(t *testing.T) {
	r := NewRecorder(6)
	r.Start(Window{})
	runSteps(r, 1, 3, phase.Batch{NumSeqs: 1, NumDecodeSeqs: 1})
	c := r.Stop()
	if len(c.Spans) != 6 || !c.Truncated {
		t.Errorf("%d spans, truncated %v; want 6, true", len(c.Spans), c.Truncated)
	}
}

// chromeTrace is the subset of the trace-event format the tests check.
type chromeTrace struct {
	TraceEvents []struct {
		Name string         `json:"name"`
		Cat  string         `json:"cat"`
		Ph   string         `json:"ph"`
		Pid  int            `json:"pid"`
		Tid  int            `json:"tid"`
		Ts   float64        `json:"ts"`
		Dur  float64        `json:"dur"`
		Args map[string]any `json:"args"`
	} `json:"traceEvents"`
	DisplayTimeUnit string         `json:"displayTimeUnit"`
	OtherData       map[string]any `json:"otherData"`
}

func TestWriteChromeTrace(t *testing.T) {
	c := &Capture{Origin: time.Unix(100, 0), Duration: time.Second, NumSteps: 1, Spans: []Span{
		{Name: "step", Phase: phase.Step, Start: 1500 * time.Nanosecond, Dur: 3 * time.Millisecond, Batch: phase.Batch{Step: 1, NumSeqs: 2, NumPrefillTokens: 30, NumDecodeSeqs: 1}},
		{Name: `odd "name"`, Phase: phase.Forward, Track: TrackDeviceGPU, Start: 2 * time.Microsecond, Dur: 1234567 * time.Nanosecond, Batch: phase.Batch{Step: 1}, Graph: true},
	}}
	var buf bytes.Buffer
	if err := WriteChromeTrace(&buf, c, map[string]string{"device": "sim"}); err != nil {
		t.Fatal(err)
	}
	var tr chromeTrace
	if err := json.Unmarshal(buf.Bytes(), &tr); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, buf.Bytes())
	}
	if tr.DisplayTimeUnit != "ms" || tr.OtherData["device"] != "sim" || tr.OtherData["num_steps"] != 1.0 {
		t.Errorf("header: unit %q, otherData %v", tr.DisplayTimeUnit, tr.OtherData)
	}
	var xs, threads int
	for _, ev := range tr.TraceEvents {
		switch ev.Ph {
		case "M":
			if ev.Name == "thread_name" {
				threads++
			}
		case "X":
			xs++
		default:
			t.Errorf("unexpected phase %q", ev.Ph)
		}
	}
	if xs != 2 || threads != int(numTracks) {
		t.Fatalf("%d X events, %d thread names", xs, threads)
	}
	step, gpu := tr.TraceEvents[len(tr.TraceEvents)-2], tr.TraceEvents[len(tr.TraceEvents)-1]
	if step.Ts != 1.5 || step.Dur != 3000 || step.Tid != 1 || step.Cat != "step" {
		t.Errorf("step event %+v", step)
	}
	if step.Args["prefill_tokens"] != 30.0 || step.Args["decode_seqs"] != 1.0 || step.Args["step"] != 1.0 {
		t.Errorf("step args %v", step.Args)
	}
	if step.Args["exec"] != nil || gpu.Args["exec"] != "graph" {
		t.Errorf("exec: engine span %v, device span %v (want none, graph)", step.Args["exec"], gpu.Args["exec"])
	}
	if gpu.Name != `odd "name"` || gpu.Dur != 1234.567 || gpu.Tid != 3 || gpu.Cat != "device" {
		t.Errorf("gpu event %+v", gpu)
	}
}

// TestRecorderOverlap drives the loop as with overlap scheduling: each
// iteration plans and submits step k, then waits for and emits step k-1.
// Device spans belong to the collected step and start from its forward.
func TestRecorderOverlap(t *testing.T) {
	dev := &fakeDevice{}
	r := NewRecorder(0)
	r.ObserveDevice(dev)
	r.Start(Window{})
	for k := int64(1); k <= 3; k++ {
		cur := phase.Batch{Step: k, NumSeqs: 2, NumDecodeSeqs: 2}
		prev := phase.Batch{Step: k - 1, NumSeqs: 2, NumDecodeSeqs: 2}
		r.Begin(phase.Step, &cur)
		r.Begin(phase.Schedule, &cur)
		r.End(phase.Schedule, &cur)
		r.Begin(phase.Forward, &cur)
		r.End(phase.Forward, &cur)
		if k > 1 {
			r.Begin(phase.Wait, &prev)
			r.End(phase.Wait, &prev)
			r.Begin(phase.Emit, &prev)
			r.End(phase.Emit, &prev)
		}
		r.End(phase.Step, &cur)
	}
	c := r.Stop()
	fwd := map[int64]Span{}
	var waits, gpu []Span
	for _, s := range c.Spans {
		switch {
		case s.Track == TrackDeviceGPU:
			gpu = append(gpu, s)
		case s.Phase == phase.Forward:
			fwd[s.Batch.Step] = s
		case s.Phase == phase.Wait:
			waits = append(waits, s)
		}
	}
	if len(waits) != 2 || waits[0].Batch.Step != 1 || waits[0].Name != "wait" {
		t.Errorf("wait spans %+v", waits)
	}
	if len(gpu) != 4 || gpu[0].Batch.Step != 1 || gpu[2].Batch.Step != 2 {
		t.Fatalf("gpu spans %+v", gpu)
	}
	for _, g := range gpu {
		f := fwd[g.Batch.Step]
		if g.Start < f.Start || (g.Name == "decode" && g.Start != f.Start+10*time.Microsecond) {
			t.Errorf("gpu span %s of step %d at %v; its forward began at %v", g.Name, g.Batch.Step, g.Start, f.Start)
		}
	}
}

// stepSpanDevice reports what the CUDA device does for a sampled step: the
// step's GPU span, then "forward" and "sample" spans nested in it.
type stepSpanDevice struct{ isOn bool }

func (d *stepSpanDevice) EnableSpans(on bool) { d.isOn = on }

func (d *stepSpanDevice) AppendSpans(dst []phase.DeviceSpan) []phase.DeviceSpan {
	return append(dst,
		phase.DeviceSpan{Name: "decode", Dur: 60 * time.Microsecond, OnGPU: true},
		phase.DeviceSpan{Name: "forward", Dur: 52 * time.Microsecond, OnGPU: true},
		phase.DeviceSpan{Name: "sample", Start: 52 * time.Microsecond, Dur: 8 * time.Microsecond, OnGPU: true})
}

// TestRecorderNestedDeviceSpans: a step's forward and sample spans reach the
// Chrome trace on the GPU track, inside their step's span.
func TestRecorderNestedDeviceSpans(t *testing.T) {
	r := NewRecorder(0)
	r.ObserveDevice(&stepSpanDevice{})
	r.Start(Window{})
	runSteps(r, 1, 2, phase.Batch{NumSeqs: 1, NumDecodeSeqs: 1})
	var buf bytes.Buffer
	if err := WriteChromeTrace(&buf, r.Stop(), nil); err != nil {
		t.Fatal(err)
	}
	var tr chromeTrace
	if err := json.Unmarshal(buf.Bytes(), &tr); err != nil {
		t.Fatal(err)
	}
	type interval struct{ ts, end float64 }
	byStep := map[float64]map[string]interval{}
	for _, ev := range tr.TraceEvents {
		if ev.Ph != "X" || ev.Tid != traceTIDBase+int(TrackDeviceGPU) {
			continue
		}
		step := ev.Args["step"].(float64)
		if byStep[step] == nil {
			byStep[step] = map[string]interval{}
		}
		byStep[step][ev.Name] = interval{ev.Ts, ev.Ts + ev.Dur}
	}
	if len(byStep) != 2 {
		t.Fatalf("GPU spans of %d steps, want 2: %v", len(byStep), byStep)
	}
	for step, spans := range byStep {
		dec, fwd, smp := spans["decode"], spans["forward"], spans["sample"]
		near := func(a, b float64) bool { return math.Abs(a-b) < 1e-3 } // µs printed from ns
		if len(spans) != 3 || !near(smp.end-smp.ts, 8) || !near(fwd.end-fwd.ts, 52) {
			t.Errorf("step %v: GPU spans %v", step, spans)
		}
		if !near(fwd.ts, dec.ts) || !near(smp.ts, fwd.end) || smp.ts < dec.ts || smp.end > dec.end+1e-3 {
			t.Errorf("step %v: forward %v and sample %v not nested in the step %v", step, fwd, smp, dec)
		}
	}
}
