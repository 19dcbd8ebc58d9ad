//go:build cudalab

package cuda

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ebitengine/purego"
)

// opProfile times each named op of forward steps with CUDA events recorded
// at the hook's opDone, for cudabench's kernel table. Events are recorded as
// "external" so that a captured decode graph contains them as event nodes:
// a replay then times the kernels back to back, without the host launch gaps
// that an eager step's events would include. Off unless EnableOpProfile.
type opProfile struct {
	noHook
	d       *Device
	events  []uintptr
	names   []string
	used    int
	marks   map[*decodeGraph][]string // the names a graph's event nodes record
	totalMs map[string]float64
	calls   map[string]int
	order   []string
}

// EnableOpProfile starts per-op timing of the following steps (graphs
// captured from then on carry the timing events). OpProfile reports and
// stops it.
//
// The first call drops captured graphs, so that they are captured again with
// the timing events; a second call while profiling only resets the totals
// (e.g. after warm-up steps).
func (d *Device) EnableOpProfile() {
	if p := d.labProfile(); p != nil {
		p.totalMs, p.calls, p.order = map[string]float64{}, map[string]int{}, nil
		return
	}
	d.dropGraphs()
	d.addHook(&opProfile{d: d, marks: map[*decodeGraph][]string{}, totalMs: map[string]float64{}, calls: map[string]int{}})
}

// labProfile is the op profile among the installed hooks, or nil.
func (d *Device) labProfile() *opProfile {
	switch h := d.instr.hook.(type) {
	case *opProfile:
		return h
	case hookList:
		for _, x := range h {
			if p, ok := x.(*opProfile); ok {
				return p
			}
		}
	}
	return nil
}

func (p *opProfile) opDone(name string) error {
	d := p.d
	if p.used == len(p.events) {
		e, err := d.g.drv.eventCreate(0)
		if err != nil {
			return err
		}
		p.events = append(p.events, e)
		p.names = append(p.names, "")
	}
	p.names[p.used] = name
	if d.graphs.capturing {
		const recordExternal = 1 // CU_EVENT_RECORD_EXTERNAL: an event node in the graph
		r, _, _ := purego.SyscallN(d.g.drv.cuEventRecordWithFlags, p.events[p.used], d.g.stream, recordExternal)
		if err := d.g.drv.check("cuEventRecordWithFlags", r); err != nil {
			return err
		}
	} else if err := d.g.drv.eventRecord(p.events[p.used], d.g.stream); err != nil {
		return err
	}
	p.used++
	return nil
}

// graphCaptured keeps the names of the marks the capture recorded: replays
// record them, not the capture.
func (p *opProfile) graphCaptured(gr *decodeGraph) error {
	p.marks[gr] = append([]string{}, p.names[:p.used]...)
	p.used = 0
	return nil
}

// graphLaunching: the replay records the first len(marks) events.
func (p *opProfile) graphLaunching(gr *decodeGraph) error {
	if m := p.marks[gr]; len(m) > 0 && len(m) <= len(p.events) {
		copy(p.names, m)
		p.used = len(m)
	}
	return nil
}

// collected folds the step's marks into the totals.
func (p *opProfile) collected(*staging, time.Duration) error {
	if p.used < 2 {
		return nil
	}
	drv := p.d.g.drv
	if err := drv.eventSync(p.events[p.used-1]); err != nil {
		return err
	}
	for i := 1; i < p.used; i++ {
		ms, err := drv.eventElapsedMs(p.events[i-1], p.events[i])
		if err != nil {
			return err
		}
		n := p.names[i]
		if _, ok := p.calls[n]; !ok {
			p.order = append(p.order, n)
		}
		p.totalMs[n] += float64(ms)
		p.calls[n]++
	}
	p.used = 0
	return nil
}

func (p *opProfile) close() {
	for _, e := range p.events {
		purego.SyscallN(p.d.g.drv.cuEventDestroy, e)
	}
	p.events = nil
}

// OpProfile returns "op: time per step" lines, slowest first, and stops
// profiling.
func (d *Device) OpProfile(steps int) string {
	p := d.labProfile()
	if p == nil {
		return ""
	}
	defer func() {
		d.removeHook(p)
		d.dropGraphs() // their event nodes belong to the profile
		p.close()
	}()
	names := append([]string{}, p.order...)
	sort.Slice(names, func(a, b int) bool { return p.totalMs[names[a]] > p.totalMs[names[b]] })
	var b strings.Builder
	sum := 0.0
	for _, n := range names {
		sum += p.totalMs[n]
	}
	for _, n := range names {
		fmt.Fprintf(&b, "  %-16s %8.1f us/step  %5.1f%%  (%d launches/step)\n", n, 1000*p.totalMs[n]/float64(steps),
			100*p.totalMs[n]/sum, p.calls[n]/max(steps, 1))
	}
	fmt.Fprintf(&b, "  %-16s %8.1f us/step\n", "total", 1000*sum/float64(steps))
	return b.String()
}
