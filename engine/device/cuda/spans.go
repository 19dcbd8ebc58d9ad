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
		if d.g.bind() != nil {
			return
		}
		for i := range d.stage {
			st := &d.stage[i]
			var err error
			if st.spanStart, err = d.g.drv.eventCreate(0); err != nil {
				return
			}
			if st.spanEnd, err = d.g.drv.eventCreate(0); err != nil {
				return
			}
		}
	}
	d.spansOn = on
	d.spanOK = false
}

// AppendSpans implements phase.SpanReporter: the span of the step Collect
// (or Forward) returned last, if it was timed.
func (d *Device) AppendSpans(dst []phase.DeviceSpan) []phase.DeviceSpan {
	if d.spanOK {
		dst = append(dst, d.lastSpan)
	}
	return dst
}

// collectSpan turns a collected step's events into lastSpan (the step's
// events have completed: its samples are back).
func (d *Device) collectSpan(st *staging) error {
	d.spanOK = false
	if !st.timed {
		return nil
	}
	st.timed = false
	ms, err := d.g.drv.eventElapsedMs(st.spanStart, st.spanEnd)
	if err != nil {
		return err
	}
	name := "decode"
	switch p := &st.plan; {
	case p.nPrefill > 0 && p.nDecode > 0 && p.graphBatch == 0:
		name = "mixed"
	case p.nPrefill > 0:
		name = "prefill"
	}
	d.lastSpan = phase.DeviceSpan{Name: name, Dur: time.Duration(float64(ms) * float64(time.Millisecond)), OnGPU: true}
	d.spanOK = true
	return nil
}
