package profile

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/roseinfer/roseinfer/engine/profile/phase"
)

// DefaultMaxSpans bounds a capture's memory (about 80 bytes a span): at four
// spans a step that is 125,000 engine steps. Later spans are dropped and the
// trace says it was truncated.
const DefaultMaxSpans = 500_000

// Track is the timeline row a span is drawn on.
type Track uint8

const (
	TrackEngine    Track = iota // the engine loop's phases, host clock
	TrackDeviceCPU              // spans a device timed on the host clock
	TrackDeviceGPU              // spans a device timed with GPU events
	numTracks
)

var trackNames = [numTracks]string{"engine loop", "device (host clock)", "device (GPU clock)"}

func (t Track) String() string { return trackNames[t] }

// Span is one recorded interval, relative to the capture's start.
type Span struct {
	Name  string
	Phase phase.Phase // for TrackEngine spans
	Track Track
	Start time.Duration
	Dur   time.Duration
	Batch phase.Batch // the step the span belongs to
	Graph bool        // device spans: the step replayed a captured graph
}

// Window limits a capture to some engine steps, as the original's torch
// profiler schedule did: skip DelaySteps steps, then record NumSteps (0 = all
// until Stop).
type Window struct {
	DelaySteps int
	NumSteps   int
}

// Capture is what a Recorder collected between Start and Stop.
type Capture struct {
	Origin        time.Time // wall clock at Start; span times are relative to it
	Duration      time.Duration
	Spans         []Span
	NumSteps      int64 // steps recorded
	Truncated     bool  // MaxSpans was reached
	DeviceReports bool  // the device reported its own spans
}

// Recorder is a phase.Observer that records spans while a capture is on.
// When off, each call costs one atomic load. Begin and End run on the engine
// loop's goroutine; Start and Stop on any other.
type Recorder struct {
	isActive atomic.Bool
	maxSpans int

	mu        sync.Mutex // guards the capture state below
	origin    time.Time
	window    Window
	numBegun  int64 // steps begun since Start
	numInWin  int64
	isInStep  bool // the current step is inside the window and began while active
	begins    [phase.NumPhases]time.Time
	spans     []Span
	truncated bool
	reported  bool

	// Loop-owned.
	dev      phase.SpanReporter
	isDevOn  bool
	devSpans []phase.DeviceSpan // scratch for AppendSpans
	// fwdStarts remembers when recent steps' Forward began, so spans a
	// device reports when a step is collected (one step later with
	// overlap) are placed from their own step's start.
	fwdStarts [4]stepStart
}

type stepStart struct {
	step int64
	at   time.Time
}

// NewRecorder returns an idle recorder; maxSpans <= 0 means DefaultMaxSpans.
func NewRecorder(maxSpans int) *Recorder {
	if maxSpans <= 0 {
		maxSpans = DefaultMaxSpans
	}
	return &Recorder{maxSpans: maxSpans}
}

// ObserveDevice lets the recorder ask dev for its own spans (GPU times) if
// dev implements phase.SpanReporter. Call it before the engine starts.
func (r *Recorder) ObserveDevice(dev any) {
	if rep, ok := dev.(phase.SpanReporter); ok {
		r.dev = rep
	}
}

// Start begins a capture, dropping anything recorded before.
func (r *Recorder) Start(w Window) {
	r.mu.Lock()
	r.origin = time.Now()
	r.window = Window{DelaySteps: max(0, w.DelaySteps), NumSteps: max(0, w.NumSteps)}
	r.numBegun, r.numInWin = 0, 0
	r.isInStep = false
	r.spans = r.spans[:0]
	r.truncated, r.reported = false, false
	r.mu.Unlock()
	r.isActive.Store(true)
}

// Stop ends the capture and returns it. A step in progress is cut off: the
// spans it had ended are kept.
func (r *Recorder) Stop() *Capture {
	r.isActive.Store(false)
	r.mu.Lock()
	defer r.mu.Unlock()
	c := &Capture{Origin: r.origin, Duration: time.Since(r.origin), Spans: r.spans,
		NumSteps: r.numInWin, Truncated: r.truncated, DeviceReports: r.reported}
	r.spans = nil
	return c
}

// IsActive reports whether a capture is on.
func (r *Recorder) IsActive() bool { return r.isActive.Load() }

// Begin implements phase.Observer.
func (r *Recorder) Begin(p phase.Phase, b *phase.Batch) {
	if !r.isActive.Load() {
		if p == phase.Step && r.isDevOn {
			r.setDevice(false)
		}
		return
	}
	now := time.Now()
	r.mu.Lock()
	if p == phase.Step {
		r.numBegun++
		w := r.window
		r.isInStep = r.numBegun > int64(w.DelaySteps) && (w.NumSteps == 0 || r.numBegun <= int64(w.DelaySteps+w.NumSteps))
		if r.isInStep {
			r.numInWin++
		}
	}
	r.begins[p] = now
	isInStep := r.isInStep
	r.mu.Unlock()
	if p == phase.Step && r.dev != nil && isInStep != r.isDevOn {
		r.setDevice(isInStep)
	}
	switch {
	case p == phase.Forward && r.isDevOn:
		r.fwdStarts[b.Step%int64(len(r.fwdStarts))] = stepStart{b.Step, now}
	case p == phase.Emit && r.isDevOn:
		r.addDeviceSpans(b)
	}
}

// addDeviceSpans asks the device for the spans of the step being collected.
func (r *Recorder) addDeviceSpans(b *phase.Batch) {
	start := r.fwdStarts[b.Step%int64(len(r.fwdStarts))]
	spans := r.dev.AppendSpans(r.devSpans[:0])
	r.devSpans = spans
	if start.step != b.Step || len(spans) == 0 {
		return // the step began before the capture (or is not known)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.isActive.Load() || start.at.Before(r.origin) {
		return
	}
	base := start.at.Sub(r.origin)
	for _, ds := range spans {
		tr := TrackDeviceCPU
		if ds.OnGPU {
			tr = TrackDeviceGPU
		}
		r.reported = true
		r.add(Span{Name: ds.Name, Phase: phase.Forward, Track: tr, Start: base + ds.Start, Dur: ds.Dur, Batch: *b, Graph: ds.Graph})
	}
}

func (r *Recorder) setDevice(on bool) {
	if r.dev != nil {
		r.dev.EnableSpans(on)
	}
	r.isDevOn = on
}

// End implements phase.Observer.
func (r *Recorder) End(p phase.Phase, b *phase.Batch) {
	if !r.isActive.Load() {
		return
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.isInStep || r.begins[p].IsZero() || r.begins[p].Before(r.origin) {
		return
	}
	name := p.String()
	if p == phase.Forward {
		name = forwardName(b)
	}
	r.add(Span{Name: name, Phase: p, Track: TrackEngine, Start: r.begins[p].Sub(r.origin), Dur: now.Sub(r.begins[p]), Batch: *b})
}

func (r *Recorder) add(s Span) {
	if len(r.spans) >= r.maxSpans {
		r.truncated = true
		return
	}
	r.spans = append(r.spans, s)
}

// forwardName names a forward span by what it computed, so a timeline
// shows prefill and decode steps apart.
func forwardName(b *phase.Batch) string {
	switch b.Kind() {
	case "prefill":
		return "forward/prefill"
	case "decode":
		return "forward/decode"
	case "mixed":
		return "forward/mixed"
	}
	return "forward"
}
