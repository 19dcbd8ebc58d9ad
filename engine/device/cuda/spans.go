package cuda

import (
	"runtime"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/roseinfer/roseinfer/engine/profile/phase"
)

// EnableSpans implements phase.SpanReporter: while on, each step's GPU work
// (inputs on the device to samples ready) is timed with a pair of CUDA
// events recorded around it on the stream, and AppendSpans reports it as a
// "prefill", "decode" or "mixed" span. A third event, recorded right before
// the sampler kernel, splits the step into "forward" (the model and LM head)
// and "sample" spans nested in it. Off, a step records nothing extra.
//
// Inside a decode graph the sampler's event is an event-record node captured
// into the graph, as the op profile's marks are. Graphs captured before
// spans were first enabled have no such node: each is captured again on its
// next use while spans are on, and from then on graphs always carry the node
// (it records a spare event nobody reads while spans are off).
func (d *Device) EnableSpans(on bool) {
	if on && d.sampleSpare == 0 {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if d.g.bind() != nil || d.createSpanEvents() != nil {
			return
		}
	}
	if on && d.g.drv.graphNodeAPI() {
		d.graphSample = true
	}
	d.spansOn = on
	d.nSpans = 0
}

// createSpanEvents makes each stage's timing events and the spare sampler
// event (those not made yet); the caller has bound the context.
func (d *Device) createSpanEvents() error {
	events := []*uintptr{&d.sampleSpare}
	for i := range d.stage {
		st := &d.stage[i]
		events = append(events, &st.spanStart, &st.spanEnd, &st.spanSample)
	}
	for _, e := range events {
		if *e != 0 {
			continue
		}
		var err error
		if *e, err = d.g.drv.eventCreate(0); err != nil {
			return err
		}
	}
	return nil
}

// AppendSpans implements phase.SpanReporter: the spans of the step Collect
// (or Forward) returned last, if it was timed: the step, then (when its
// sampler ran and was timed) "forward" and "sample" within it.
func (d *Device) AppendSpans(dst []phase.DeviceSpan) []phase.DeviceSpan {
	return append(dst, d.lastSpans[:d.nSpans]...)
}

// collectSpan turns a collected step's events into lastSpans while spans are
// on (the step's events have completed: its samples are back) and returns
// the step's GPU time (0 when it was not timed).
func (d *Device) collectSpan(st *staging) (time.Duration, error) {
	d.nSpans = 0
	sampleTimed := st.sampleTimed
	st.sampleTimed = false
	if !st.timed {
		return 0, nil
	}
	st.timed = false
	dur, err := d.elapsed(st.spanStart, st.spanEnd)
	if err != nil || !d.spansOn {
		return dur, err
	}
	name := "decode"
	switch p := &st.plan; {
	case p.chunkSeqs > 0 && p.oneTokenSeqs > 0:
		name = "mixed"
	case p.chunkSeqs > 0:
		name = "prefill"
	}
	d.lastSpans[0] = phase.DeviceSpan{Name: name, Dur: dur, OnGPU: true}
	d.nSpans = 1
	if !sampleTimed {
		return dur, nil
	}
	fwd, err := d.elapsed(st.spanStart, st.spanSample)
	if err != nil {
		return dur, err
	}
	smp, err := d.elapsed(st.spanSample, st.spanEnd)
	if err != nil {
		return dur, err
	}
	d.lastSpans[1] = phase.DeviceSpan{Name: "forward", Dur: fwd, OnGPU: true}
	d.lastSpans[2] = phase.DeviceSpan{Name: "sample", Start: fwd, Dur: smp, OnGPU: true}
	d.nSpans = 3
	return dur, nil
}

func (d *Device) elapsed(start, end uintptr) (time.Duration, error) {
	ms, err := d.g.drv.eventElapsedMs(start, end)
	return time.Duration(float64(ms) * float64(time.Millisecond)), err
}

// recordSampleStart records the sampler's event right before the sampler
// kernel is enqueued: the step's (d.sampleEvent) when run eagerly, the spare
// one as a graph node when a graph is being captured with it.
func (d *Device) recordSampleStart() error {
	e := d.sampleEvent
	if d.capturing {
		if !d.graphSample {
			return nil
		}
		const recordExternal = 1 // CU_EVENT_RECORD_EXTERNAL: an event node in the graph
		r, _, _ := purego.SyscallN(d.g.drv.cuEventRecordWithFlags, d.sampleSpare, d.g.stream, recordExternal)
		return d.g.drv.check("cuEventRecordWithFlags", r)
	}
	if e == 0 {
		return nil
	}
	if err := d.g.drv.eventRecord(e, d.g.stream); err != nil {
		return err
	}
	d.sampleRecorded = true
	return nil
}

// findSampleNode returns the event-record node of graph that records the
// spare sampler event (0 if there is none).
func (d *Device) findSampleNode(graph uintptr) (uintptr, error) {
	drv := d.g.drv
	var n uintptr
	if err := drv.call("cuGraphGetNodes", drv.cuGraphGetNodes, graph, 0, uintptr(unsafe.Pointer(&n))); err != nil || n == 0 {
		return 0, err
	}
	nodes := make([]uintptr, n)
	if err := drv.call("cuGraphGetNodes", drv.cuGraphGetNodes, graph, uintptr(unsafe.Pointer(&nodes[0])), uintptr(unsafe.Pointer(&n))); err != nil {
		return 0, err
	}
	const nodeEventRecord = 7 // CU_GRAPH_NODE_TYPE_EVENT_RECORD
	for _, node := range nodes[:min(int(n), len(nodes))] {
		var typ int32
		if err := drv.call("cuGraphNodeGetType", drv.cuGraphNodeGetType, node, uintptr(unsafe.Pointer(&typ))); err != nil {
			return 0, err
		}
		if typ != nodeEventRecord {
			continue
		}
		var e uintptr
		if err := drv.call("cuGraphEventRecordNodeGetEvent", drv.cuGraphEventRecordNodeGetEvent, node, uintptr(unsafe.Pointer(&e))); err != nil {
			return 0, err
		}
		if e == d.sampleSpare {
			return node, nil
		}
	}
	return 0, nil
}

// pointSampleNode makes gr's sampler node record the step's event (the
// spare one when the step is not timed) before gr is launched. Launches
// already enqueued keep the event they had, so each of two steps in flight
// records its own stage's event.
func (d *Device) pointSampleNode(gr *decodeGraph) error {
	if gr.sampleNode == 0 {
		return nil
	}
	want := d.sampleEvent
	if want == 0 {
		want = d.sampleSpare
	}
	if gr.nodeEvent != want {
		drv := d.g.drv
		if err := drv.call("cuGraphExecEventRecordNodeSetEvent", drv.cuGraphExecEventRecordNodeSetEvent, gr.exec, gr.sampleNode, want); err != nil {
			return err
		}
		gr.nodeEvent = want
	}
	d.sampleRecorded = d.sampleEvent != 0
	return nil
}

// graphNodeAPI: the driver has what sampler nodes in graphs need.
func (drv *driver) graphNodeAPI() bool {
	return drv.cuGraphGetNodes != 0 && drv.cuGraphNodeGetType != 0 && drv.cuGraphEventRecordNodeGetEvent != 0 &&
		drv.cuGraphExecEventRecordNodeSetEvent != 0
}
