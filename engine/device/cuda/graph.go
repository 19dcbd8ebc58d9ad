package cuda

import (
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"
)

// decodeGraph is one decode step of a fixed batch size, captured once and
// replayed: ~130 launches become one cuGraphLaunch, which matters because a
// purego launch costs ~4-5 µs of host time and a GPT-2 decode step at small
// batch is only a few hundred µs of GPU work. Inputs live at fixed device
// addresses (layout depends only on the batch size), so a replay reads the
// step's fresh inputs copied just before it; each stage has its own inputs,
// so a size has a graph per stage.
type decodeGraph struct {
	graph, exec uintptr
	sampleNode  uintptr // the event-record node before the sampler (spans.go); 0 = none
	nodeEvent   uintptr // the event sampleNode records at the next launch
}

// graphKey names a captured decode graph: its padded batch size, the stage
// whose device inputs (staging.devIn) its kernels read, and whether its
// attention does the rotary block's q/k rotation (foldsRope: a size's
// decode-only steps and its steps with chunks laid out as rows launch
// different kernels).
type graphKey struct {
	size, stage int
	foldsRope   bool
}

// graphKey is the key of the graph that runs p.
func (d *Device) graphKey(p *stepPlan) graphKey {
	return graphKey{p.graphBatch, p.stage, d.foldsRope(p)}
}

// graphSizeFor is the smallest captured size >= n, or 0 (run eagerly).
func (d *Device) graphSizeFor(n int) int {
	best := 0
	for _, s := range d.opts.GraphBatchSizes {
		if s >= n && s <= d.opts.MaxSeqs && (best == 0 || s < best) {
			best = s
		}
	}
	return best
}

// runGraph enqueues a padded decode step: eagerly the first time its size is
// seen (which builds the cuBLASLt plans outside any capture), captured and
// launched the first time after that from each stage, launched from then on.
func (d *Device) runGraph(p *stepPlan) error {
	key := d.graphKey(p)
	gr := d.graphs.byKey[key]
	if gr == nil {
		gr = &decodeGraph{}
		d.graphs.byKey[key] = gr
		if !d.graphSizeSeen(key) {
			return d.forward(p)
		}
	}
	drv, s := d.g.drv, d.g.stream
	if gr.exec == 0 {
		graph, exec, err := d.g.capture(func() error {
			d.graphs.capturing = true
			defer func() { d.graphs.capturing = false }()
			return d.forward(p)
		})
		if err != nil {
			return fmt.Errorf("cuda: capturing decode graph of batch %d: %w", p.graphBatch, err)
		}
		gr.graph, gr.exec = graph, exec
		if h := d.instr.hook; h != nil {
			if err := h.graphCaptured(gr); err != nil {
				return err
			}
		}
	}
	if h := d.instr.hook; h != nil {
		if err := h.graphLaunching(gr); err != nil {
			return err
		}
	}
	r, _, _ := purego.SyscallN(drv.cuGraphLaunch, gr.exec, s)
	p.isGraphLaunch = true
	return drv.check("cuGraphLaunch", r)
}

// graphSizeSeen reports whether a step of key's size ran under another key
// (from another stage, or with the other layout): the plans it needs exist.
func (d *Device) graphSizeSeen(key graphKey) bool {
	for k := range d.graphs.byKey {
		if k.size == key.size && k != key {
			return true
		}
	}
	return false
}

// retireGraphs has every graph captured again on its next use (spans.go:
// with the sampler's node). A graph may still run for a step in flight, so
// the old ones are freed with the next dropGraphs.
func (d *Device) retireGraphs() {
	for _, gr := range d.graphs.byKey {
		if gr.exec != 0 {
			d.graphs.retired = append(d.graphs.retired, *gr)
			*gr = decodeGraph{}
		}
	}
}

func (d *Device) dropGraphs() {
	for k, gr := range d.graphs.byKey {
		d.destroyGraph(gr)
		delete(d.graphs.byKey, k)
	}
	for i := range d.graphs.retired {
		d.destroyGraph(&d.graphs.retired[i])
	}
	d.graphs.retired = nil
}

// destroyGraph frees gr's graph and executable.
func (d *Device) destroyGraph(gr *decodeGraph) {
	if gr.exec != 0 {
		purego.SyscallN(d.g.drv.cuGraphExecDestroy, gr.exec)
	}
	if gr.graph != 0 {
		purego.SyscallN(d.g.drv.cuGraphDestroy, gr.graph)
	}
	*gr = decodeGraph{}
}

// capture records what enqueue puts on the stream as a CUDA graph and
// instantiates it; the caller destroys both (destroyGraph).
func (g *gpu) capture(enqueue func() error) (graph, exec uintptr, err error) {
	drv, s := g.drv, g.stream
	if err := drv.call("cuStreamBeginCapture_v2", drv.cuStreamBeginCapture, s, captureModeThreadLoc); err != nil {
		return 0, 0, err
	}
	eerr := enqueue()
	cerr := drv.call("cuStreamEndCapture", drv.cuStreamEndCapture, s, uintptr(unsafe.Pointer(&graph)))
	if eerr != nil || cerr != nil {
		if graph != 0 {
			purego.SyscallN(drv.cuGraphDestroy, graph)
		}
		return 0, 0, fmt.Errorf("%v / %v", eerr, cerr)
	}
	if err := drv.call("cuGraphInstantiateWithFlags", drv.cuGraphInstantiate, uintptr(unsafe.Pointer(&exec)), graph, graphInstantiateFlags); err != nil {
		purego.SyscallN(drv.cuGraphDestroy, graph)
		return 0, 0, err
	}
	return graph, exec, nil
}
