// Package phase names the parts of one engine step so that observers can
// bracket them: the profile recorder turns them into a Chrome trace, and a
// GPU device can open NVTX ranges with the same names. It imports nothing
// from the engine, so the engine, devices and profilers can all depend on it.
//
// The engine calls an Observer only when one is configured; a nil Observer
// costs one pointer comparison per phase.
package phase

import "time"

// Phase is one part of an engine step. Step (one iteration of the loop)
// encloses the others. Synchronously an iteration is Schedule, Forward,
// Emit for one engine step. With overlap scheduling it is Schedule and
// Forward of step N+1 (Forward is then only the submit to the device), then
// Wait and Emit of step N, whose results the device finished meanwhile.
type Phase uint8

const (
	Step     Phase = iota // one iteration of the engine loop
	Schedule              // the scheduler picks sequences, allocates KV blocks; the batch is built
	Forward               // the device runs the model over the batch and samples (async: is handed the batch)
	Wait                  // async devices: the loop waits for a submitted step's results
	Emit                  // tokens are appended and sent, finished sequences freed
	NumPhases
)

var names = [NumPhases]string{"step", "schedule", "forward", "wait", "emit"}

// String is the phase's name as it appears in traces and NVTX ranges.
func (p Phase) String() string {
	if p < NumPhases {
		return names[p]
	}
	return "unknown"
}

// Batch describes the engine step a phase belongs to. For Step, Schedule and
// Forward that is the step being planned (counts are zero at Schedule's
// Begin, set once the batch is built); for Wait and Emit the step whose
// results are collected. Observers must not keep the pointer.
type Batch struct {
	Step             int64 // 1-based step number of this engine
	NumSeqs          int   // sequences in the device batch
	NumPrefillTokens int   // tokens fed as prompt (or recompute) chunks
	NumDecodeSeqs    int   // sequences fed one generated token
}

// Kind is "prefill", "decode" or "mixed" (both in one forward); "" for an
// empty batch.
func (b *Batch) Kind() string {
	switch {
	case b.NumPrefillTokens > 0 && b.NumDecodeSeqs > 0:
		return "mixed"
	case b.NumPrefillTokens > 0:
		return "prefill"
	case b.NumDecodeSeqs > 0:
		return "decode"
	}
	return ""
}

// Observer is told when each phase of a step begins and ends, on the engine
// loop's goroutine. Implementations must be fast and must not block: they run
// inside the step they measure.
type Observer interface {
	Begin(p Phase, b *Batch)
	End(p Phase, b *Batch)
}

// Multi returns an Observer that calls each non-nil observer in order (End
// in reverse order, so ranges nest), or nil when there is none.
func Multi(observers ...Observer) Observer {
	var list multi
	for _, o := range observers {
		if o != nil {
			list = append(list, o)
		}
	}
	switch len(list) {
	case 0:
		return nil
	case 1:
		return list[0]
	}
	return list
}

type multi []Observer

func (m multi) Begin(p Phase, b *Batch) {
	for _, o := range m {
		o.Begin(p, b)
	}
}

func (m multi) End(p Phase, b *Batch) {
	for i := len(m) - 1; i >= 0; i-- {
		m[i].End(p, b)
	}
}

// DeviceSpan is an interval a device measured inside one Forward, such as
// CUDA-event times of its prefill, decode and sampling kernels.
type DeviceSpan struct {
	Name  string        // e.g. "prefill", "decode", "sample"
	Start time.Duration // from the beginning of the step's Forward phase (GPU spans: from its first event)
	Dur   time.Duration
	OnGPU bool // measured on the device's clock rather than the host's
	// Graph: the step's work was replayed from a captured graph (CUDA
	// graphs); false: launched op by op (eager).
	Graph bool
}

// SpanReporter is implemented by devices that time parts of their own
// steps. A profiler asks for a step's spans once its results are collected
// (at Emit's Begin); the device appends the spans of the step it returned
// last. A device measures only while profiling is on (EnableSpans).
type SpanReporter interface {
	// EnableSpans turns per-Forward measurement on or off. It is called
	// from the engine loop's goroutine, between steps.
	EnableSpans(on bool)
	AppendSpans(dst []DeviceSpan) []DeviceSpan
}
