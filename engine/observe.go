package engine

import (
	"github.com/roseinfer/roseinfer/engine/profile/phase"
	"github.com/roseinfer/roseinfer/engine/scheduler"
)

// observer reports the loop's phases to Config.Observer (engine/profile's
// recorder, NVTX ranges). Each method returns at once when there is no
// observer, so the loop pays one comparison per phase. It mirrors the
// flights FIFO so Wait and Emit carry the step they collect.
type observer struct {
	obs       phase.Observer
	step      phase.Batch // the step being planned and submitted
	submitted [maxFlights]phase.Batch
	head, n   int
	collected phase.Batch // the step being collected
	isWaiting bool
}

// stepBegin opens a loop iteration that would plan step next.
func (o *observer) stepBegin(next int64) {
	if o.obs == nil {
		return
	}
	o.step = phase.Batch{Step: next}
	o.obs.Begin(phase.Step, &o.step)
	o.obs.Begin(phase.Schedule, &o.step)
}

// planned ends Schedule at once when nothing was planned (the iteration
// only collects); otherwise forwardBegin ends it once the batch is built.
func (o *observer) planned(numSeqs int) {
	if o.obs == nil || numSeqs > 0 {
		return
	}
	o.obs.End(phase.Schedule, &o.step)
}

// stepEnd closes the iteration.
func (o *observer) stepEnd() {
	if o.obs == nil {
		return
	}
	o.obs.End(phase.Step, &o.step)
}

// forwardBegin ends Schedule with the batch's shape and starts Forward.
func (o *observer) forwardBegin(plan []scheduler.Scheduled) {
	if o.obs == nil {
		return
	}
	describe(&o.step, plan)
	o.obs.End(phase.Schedule, &o.step)
	o.obs.Begin(phase.Forward, &o.step)
}

// forwardEnd ends Forward; the step is now in flight.
func (o *observer) forwardEnd() {
	if o.obs == nil {
		return
	}
	o.obs.End(phase.Forward, &o.step)
	o.submitted[(o.head+o.n)%maxFlights] = o.step
	o.n++
}

// collectBegin takes the oldest step in flight; isWaiting: the loop is
// about to block for its results (async devices).
func (o *observer) collectBegin(isWaiting bool) {
	if o.obs == nil {
		return
	}
	o.collected = o.submitted[o.head]
	o.head = (o.head + 1) % maxFlights
	o.n--
	o.isWaiting = isWaiting
	if isWaiting {
		o.obs.Begin(phase.Wait, &o.collected)
	}
}

// emitBegin: the results are in; tokens are applied next.
func (o *observer) emitBegin() {
	if o.obs == nil {
		return
	}
	if o.isWaiting {
		o.obs.End(phase.Wait, &o.collected)
	}
	o.obs.Begin(phase.Emit, &o.collected)
}

func (o *observer) emitEnd() {
	if o.obs == nil {
		return
	}
	o.obs.End(phase.Emit, &o.collected)
}

// describe sets b's counts from a plan: a one-token entry past the prompt
// is a decode, anything else prompt (or recompute) tokens.
func describe(b *phase.Batch, plan []scheduler.Scheduled) {
	b.NumSeqs, b.NumPrefillTokens, b.NumDecodeSeqs = len(plan), 0, 0
	for _, p := range plan {
		if p.NumTokens == 1 && (p.FromPrevious || p.StartPos >= p.Seq.NumPromptTokens) {
			b.NumDecodeSeqs++
		} else {
			b.NumPrefillTokens += p.NumTokens
		}
	}
}
