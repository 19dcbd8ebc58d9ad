package cuda

import "time"

// stepHook is the one place instrumentation plugs into a step: GPU spans
// (spans.go) and, in cudalab builds, the per-op profile and the step
// statistics (lab_profile.go, lab_stats.go). Device.instr.hook is nil unless one
// of them is on, and every call site is a nil check, so the product's steps
// pay nothing for it and a captured decode graph holds the same kernels.
//
// A step calls it at fixed points: Submit before the step's first kernel
// (stepBegin) and after its last (stepEnd), forward after each named op
// (opDone, "start" before the first), runGraph after capturing a decode
// graph and before launching one, Collect once the step's samples are back.
type stepHook interface {
	stepBegin(st *staging) error
	opDone(name string) error
	graphCaptured(gr *decodeGraph) error
	graphLaunching(gr *decodeGraph) error
	stepEnd(st *staging) error
	collected(st *staging, wait time.Duration) error
	close() // the device is closing: free the hook's events, print its report
}

// noHook is a stepHook that does nothing; hooks embed it and override what
// they need.
type noHook struct{}

func (noHook) stepBegin(*staging) error                { return nil }
func (noHook) opDone(string) error                     { return nil }
func (noHook) graphCaptured(*decodeGraph) error        { return nil }
func (noHook) graphLaunching(*decodeGraph) error       { return nil }
func (noHook) stepEnd(*staging) error                  { return nil }
func (noHook) collected(*staging, time.Duration) error { return nil }
func (noHook) close()                                  {}

// hookList calls several hooks in turn (spans and the stats at once).
type hookList []stepHook

func (l hookList) stepBegin(st *staging) error {
	for _, h := range l {
		if err := h.stepBegin(st); err != nil {
			return err
		}
	}
	return nil
}

func (l hookList) opDone(name string) error {
	for _, h := range l {
		if err := h.opDone(name); err != nil {
			return err
		}
	}
	return nil
}

func (l hookList) graphCaptured(gr *decodeGraph) error {
	for _, h := range l {
		if err := h.graphCaptured(gr); err != nil {
			return err
		}
	}
	return nil
}

func (l hookList) graphLaunching(gr *decodeGraph) error {
	for _, h := range l {
		if err := h.graphLaunching(gr); err != nil {
			return err
		}
	}
	return nil
}

func (l hookList) stepEnd(st *staging) error {
	for _, h := range l {
		if err := h.stepEnd(st); err != nil {
			return err
		}
	}
	return nil
}

func (l hookList) collected(st *staging, wait time.Duration) error {
	for _, h := range l {
		if err := h.collected(st, wait); err != nil {
			return err
		}
	}
	return nil
}

func (l hookList) close() {
	for _, h := range l {
		h.close()
	}
}

// addHook installs h beside the hooks already on.
func (d *Device) addHook(h stepHook) {
	switch cur := d.instr.hook.(type) {
	case nil:
		d.instr.hook = h
	case hookList:
		d.instr.hook = append(cur, h)
	default:
		d.instr.hook = hookList{cur, h}
	}
}

// removeHook uninstalls h (nothing if it is not on).
func (d *Device) removeHook(h stepHook) {
	switch cur := d.instr.hook.(type) {
	case hookList:
		var rest hookList
		for _, x := range cur {
			if x != h {
				rest = append(rest, x)
			}
		}
		switch len(rest) {
		case 0:
			d.instr.hook = nil
		case 1:
			d.instr.hook = rest[0]
		default:
			d.instr.hook = rest
		}
	default:
		if cur == h {
			d.instr.hook = nil
		}
	}
}

// opDone tells the hook that op name's kernels are enqueued.
func (d *Device) opDone(name string) error {
	if d.instr.hook == nil {
		return nil
	}
	return d.instr.hook.opDone(name)
}

// The LM head's op names: the sampler follows each, so the spans' "sample"
// phase starts where one of them is done.
const (
	opLMHeadTiled = "lmhead"         // lmhead.cu, LayerNorm fused, tile keys
	opLMHeadGemv  = "gemv_ln_lmhead" // gemv.cu, LayerNorm fused
	opLMHeadGemm  = "gemm_lmhead"    // cuBLASLt after layernorm_f
)

func isLMHeadOp(name string) bool {
	return name == opLMHeadTiled || name == opLMHeadGemv || name == opLMHeadGemm
}
