package cuda

import (
	"runtime"
	"time"

	"github.com/roseinfer/roseinfer/engine/profile/phase"
)

// EnableSpans implements phase.SpanReporter: while on, each step's GPU work
// (inputs on the device to samples ready) is timed with a pair of CUDA
// events recorded around it on the stream, and AppendSpans reports it as a
// "prefill", "decode" or "mixed" span. Off, a step records nothing extra.
func (d *Device) EnableSpans(on bool) {
	if on && d.stage[0].spanStart == 0 {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if d.g.bind() != nil || d.createSpanEvents() != nil {
			return
		}
	}
	d.spansOn = on
	d.spanOK = false
}

// createSpanEvents makes each stage's pair of timing events (once); the
// caller has bound the context.
func (d *Device) createSpanEvents() error {
	for i := range d.stage {
		st := &d.stage[i]
		if st.spanStart != 0 {
			continue
		}
		var err error
		if st.spanStart, err = d.g.drv.eventCreate(0); err != nil {
			return err
		}
		if st.spanEnd, err = d.g.drv.eventCreate(0); err != nil {
			return err
		}
	}
	return nil
}

// AppendSpans implements phase.SpanReporter: the span of the step Collect
// (or Forward) returned last, if it was timed.
func (d *Device) AppendSpans(dst []phase.DeviceSpan) []phase.DeviceSpan {
	if d.spanOK {
		dst = append(dst, d.lastSpan)
	}
	return dst
}

// collectSpan turns a collected step's events into lastSpan while spans are
// on (the step's events have completed: its samples are back) and returns
// the step's GPU time (0 when it was not timed).
func (d *Device) collectSpan(st *staging) (time.Duration, error) {
	d.spanOK = false
	if !st.timed {
		return 0, nil
	}
	st.timed = false
	ms, err := d.g.drv.eventElapsedMs(st.spanStart, st.spanEnd)
	if err != nil {
		return 0, err
	}
	dur := time.Duration(float64(ms) * float64(time.Millisecond))
	if !d.spansOn {
		return dur, nil
	}
	name := "decode"
	switch p := &st.plan; {
	case p.nPrefill > 0 && p.nDecode > 0 && p.graphBatch == 0:
		name = "mixed"
	case p.nPrefill > 0:
		name = "prefill"
	}
	d.lastSpan = phase.DeviceSpan{Name: name, Dur: dur, OnGPU: true}
	d.spanOK = true
	return dur, nil
}
