package profile

import (
	"github.com/roseinfer/roseinfer/harness/client"
	"github.com/roseinfer/roseinfer/harness/replay"
	"github.com/roseinfer/roseinfer/harness/workload"
)

// work is what every profiled server runs: its warmup requests, then
// requests sent at their scheduled times. It encodes bodies per server
// (model id and request quirks differ).
type work interface {
	// quirks is the request shape for a server with these quirks (the
	// endpoint the replay uses included).
	quirks(q client.Quirks) client.Quirks
	warmupBodies(model string, q client.Quirks) ([][]byte, error)
	items(model string, q client.Quirks) ([]replay.Item, error)
}

// onlineWorkload is the benchmark's workload (workload.Load) rebuilt for
// profiling: the same rows, prompts, warmup and request bodies, with
// --profile-output-len as the output clamp, cut to the first --profile-n
// rows by time and scheduled at --profile-scale.
type onlineWorkload struct {
	o            *workload.Options
	w            *workload.Workload
	startOffsetS float64
	scale        float64
}

func newOnlineWorkload(o *workload.Options, startOffsetS float64, p *Options) (*onlineWorkload, error) {
	clamped := *o
	if p.OutputLen != 0 {
		clamped.MaxOutputLen = p.OutputLen
	}
	// Prompts are built for every row, as the benchmark did, so the
	// profiled requests carry the very prompts that were measured.
	w, err := workload.Load(&clamped)
	if err != nil {
		return nil, err
	}
	return &onlineWorkload{o: o, w: w.Head(p.N), startOffsetS: startOffsetS, scale: p.Scale}, nil
}

func (w *onlineWorkload) quirks(q client.Quirks) client.Quirks { return w.o.Quirks(q) }

func (w *onlineWorkload) warmupBodies(model string, q client.Quirks) ([][]byte, error) {
	return w.w.WarmupBodies(w.o, model, q)
}

func (w *onlineWorkload) items(model string, q client.Quirks) ([]replay.Item, error) {
	bodies, err := w.w.Bodies(w.o, model, q)
	if err != nil {
		return nil, err
	}
	return w.w.Items(bodies, w.scale, w.startOffsetS)
}
