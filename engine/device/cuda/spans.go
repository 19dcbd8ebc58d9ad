package cuda

import (
	"runtime"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/roseinfer/roseinfer/engine/profile/phase"
)

// spanHook times steps for phase.SpanReporter (the server's profile stage):
// a pair of CUDA events recorded on the stream around each step's GPU work
// (inputs on the device to samples ready), and a third right before the
// sampler kernel, which splits the step into "forward" (the model and LM
// head) and "sample" spans nested in it.
//
// Inside a decode graph the sampler's event is an event-record node
// captured into the graph, as the op profile's marks are. Once spans have
// been on, every graph carries that node (it records a spare event nobody
// reads while spans are off), so the hook stays installed after
// EnableSpans(false).
type spanHook struct {
	noHook
	d           *Device
	on          bool
	graphSample bool    // graphs carry the sampler's node (the driver has the node API)
	sampleSpare uintptr // the event the node records when the step is not timed

	stage [numStages]stageSpans

	// The step being submitted: the event forward records before the
	// sampler (0: none) and whether it did.
	sampleEvent    uintptr
	sampleRecorded bool

	last  [3]phase.DeviceSpan // of the step Collect returned last
	nLast int                 // how many of last are valid
}

// stageSpans are one stage's timing events and what its step recorded.
type stageSpans struct {
	start, end, sample uintptr
	timed, sampleTimed bool
}

// EnableSpans implements phase.SpanReporter: while on, each step's GPU work
// is timed and AppendSpans reports it as a "prefill", "decode" or "mixed"
// span, with "forward" and "sample" spans nested in it when it sampled.
// Off, a step records nothing extra.
func (d *Device) EnableSpans(on bool) {
	h := d.instr.spans
	if on && h == nil {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if d.g.bind() != nil {
			return
		}
		h = &spanHook{d: d}
		if h.createEvents() != nil {
			h.close()
			return
		}
		d.instr.spans = h
		d.addHook(h)
	}
	if h == nil {
		return
	}
	if on && !h.graphSample && d.g.drv.graphNodeAPI() {
		h.graphSample = true
		d.retireGraphs() // captured again with the sampler's node on their next use
	}
	h.on = on
	h.nLast = 0
}

// createEvents makes each stage's timing events and the spare sampler
// event; the caller has bound the context.
func (h *spanHook) createEvents() error {
	events := []*uintptr{&h.sampleSpare}
	for i := range h.stage {
		s := &h.stage[i]
		events = append(events, &s.start, &s.end, &s.sample)
	}
	for _, e := range events {
		var err error
		if *e, err = h.d.g.drv.eventCreate(0); err != nil {
			return err
		}
	}
	return nil
}

func (h *spanHook) close() {
	drv := h.d.g.drv
	for _, e := range []uintptr{h.sampleSpare, h.stage[0].start, h.stage[0].end, h.stage[0].sample, h.stage[1].start, h.stage[1].end, h.stage[1].sample} {
		if e != 0 {
			purego.SyscallN(drv.cuEventDestroy, e)
		}
	}
	*h = spanHook{d: h.d}
}

// AppendSpans implements phase.SpanReporter: the spans of the step Collect
// (or Forward) returned last, if it was timed: the step, then (when its
// sampler ran and was timed) "forward" and "sample" within it.
func (d *Device) AppendSpans(dst []phase.DeviceSpan) []phase.DeviceSpan {
	if d.instr.spans == nil {
		return dst
	}
	return append(dst, d.instr.spans.last[:d.instr.spans.nLast]...)
}

func (h *spanHook) stepBegin(st *staging) error {
	s := &h.stage[st.index]
	s.timed, s.sampleTimed = h.on, false
	h.sampleEvent, h.sampleRecorded = 0, false
	if !h.on {
		return nil
	}
	h.sampleEvent = s.sample
	return h.d.g.drv.eventRecord(s.start, h.d.g.stream)
}

// opDone records the sampler's event once the LM head is enqueued: the
// step's own when run eagerly, the spare one as a graph node when a graph
// is being captured.
func (h *spanHook) opDone(name string) error {
	if !isLMHeadOp(name) {
		return nil
	}
	d := h.d
	if d.graphs.capturing {
		if !h.graphSample {
			return nil
		}
		const recordExternal = 1 // CU_EVENT_RECORD_EXTERNAL: an event node in the graph
		r, _, _ := purego.SyscallN(d.g.drv.cuEventRecordWithFlags, h.sampleSpare, d.g.stream, recordExternal)
		return d.g.drv.check("cuEventRecordWithFlags", r)
	}
	if h.sampleEvent == 0 {
		return nil
	}
	if err := d.g.drv.eventRecord(h.sampleEvent, d.g.stream); err != nil {
		return err
	}
	h.sampleRecorded = true
	return nil
}

// graphCaptured finds the new graph's sampler node.
func (h *spanHook) graphCaptured(gr *decodeGraph) error {
	if !h.graphSample {
		return nil
	}
	node, err := h.findSampleNode(gr.graph)
	if err != nil {
		return err
	}
	gr.sampleNode, gr.nodeEvent = node, h.sampleSpare
	return nil
}

// graphLaunching makes gr's sampler node record the step's event (the
// spare one when the step is not timed) before gr is launched. Launches
// already enqueued keep the event they had, so each of two steps in flight
// records its own stage's event.
func (h *spanHook) graphLaunching(gr *decodeGraph) error {
	if gr.sampleNode == 0 {
		return nil
	}
	want := h.sampleEvent
	if want == 0 {
		want = h.sampleSpare
	}
	if gr.nodeEvent != want {
		drv := h.d.g.drv
		if err := drv.call("cuGraphExecEventRecordNodeSetEvent", drv.cuGraphExecEventRecordNodeSetEvent, gr.exec, gr.sampleNode, want); err != nil {
			return err
		}
		gr.nodeEvent = want
	}
	h.sampleRecorded = h.sampleEvent != 0
	return nil
}

func (h *spanHook) stepEnd(st *staging) error {
	s := &h.stage[st.index]
	s.sampleTimed = h.sampleRecorded
	h.sampleEvent = 0
	if !s.timed {
		return nil
	}
	return h.d.g.drv.eventRecord(s.end, h.d.g.stream)
}

// collected turns a collected step's events into the spans AppendSpans
// reports (the step's events have completed: its samples are back).
func (h *spanHook) collected(st *staging, _ time.Duration) error {
	h.nLast = 0
	s := &h.stage[st.index]
	timed, sampleTimed := s.timed, s.sampleTimed
	s.timed, s.sampleTimed = false, false
	if !timed || !h.on {
		return nil
	}
	d := h.d
	dur, err := d.elapsed(s.start, s.end)
	if err != nil {
		return err
	}
	isGraph := st.plan.isGraphLaunch
	h.last[0] = phase.DeviceSpan{Name: stepSpanName(&st.plan), Dur: dur, OnGPU: true, Graph: isGraph}
	h.nLast = 1
	if !sampleTimed {
		return nil
	}
	fwd, err := d.elapsed(s.start, s.sample)
	if err != nil {
		return err
	}
	smp, err := d.elapsed(s.sample, s.end)
	if err != nil {
		return err
	}
	h.last[1] = phase.DeviceSpan{Name: "forward", Dur: fwd, OnGPU: true, Graph: isGraph}
	h.last[2] = phase.DeviceSpan{Name: "sample", Start: fwd, Dur: smp, OnGPU: true, Graph: isGraph}
	h.nLast = 3
	return nil
}

// stepSpanName is a step's span: "prefill", "decode" or "mixed".
func stepSpanName(p *stepPlan) string {
	switch {
	case p.chunkSeqs > 0 && p.oneTokenSeqs > 0:
		return "mixed"
	case p.chunkSeqs > 0:
		return "prefill"
	}
	return "decode"
}

func (d *Device) elapsed(start, end uintptr) (time.Duration, error) {
	ms, err := d.g.drv.eventElapsedMs(start, end)
	return time.Duration(float64(ms) * float64(time.Millisecond)), err
}

// findSampleNode returns the event-record node of graph that records the
// spare sampler event (0 if there is none).
func (h *spanHook) findSampleNode(graph uintptr) (uintptr, error) {
	drv := h.d.g.drv
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
		if e == h.sampleSpare {
			return node, nil
		}
	}
	return 0, nil
}

// graphNodeAPI: the driver has what sampler nodes in graphs need.
func (drv *driver) graphNodeAPI() bool {
	return drv.cuGraphGetNodes != 0 && drv.cuGraphNodeGetType != 0 && drv.cuGraphEventRecordNodeGetEvent != 0 &&
		drv.cuGraphExecEventRecordNodeSetEvent != 0
}
