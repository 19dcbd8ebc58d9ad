package cuda

import (
	"fmt"
	"os"
	"sync"

	"github.com/ebitengine/purego"

	"github.com/roseinfer/roseinfer/engine/profile/phase"
)

// NVTX ranges make an nsys timeline readable: with ROSEINFER_NVTX=1 the
// engine's phases (through NVTXObserver) and the device's own submit and
// collect calls open named ranges. libnvToolsExt (NVTX v2: CUDA <= 12
// toolkits, the nvidia-nvtx-cu12 wheel; ROSEINFER_NVTX_LIB names another
// path) is opened at run time like the other CUDA libraries; when it is
// absent (or the variable is unset) every call is a no-op costing one nil
// check.
//
// Ranges are NVTX start/end ranges, not push/pop: push/pop ranges belong to
// an OS thread, and a goroutine may move between threads inside a range.
// NVTXPush and NVTXPop keep their own stack of open range ids.

type nvtxLib struct {
	start, end uintptr
	mu         sync.Mutex
	names      map[string]uintptr // C copies of the range names, made once
	arena      *cArena
	open       []uint64 // ids of ranges opened by NVTXPush, innermost last
}

var (
	nvtxOnce sync.Once
	nvtxL    *nvtxLib
)

func nvtx() *nvtxLib {
	nvtxOnce.Do(func() {
		if os.Getenv("ROSEINFER_NVTX") != "1" {
			return
		}
		names := []string{"libnvToolsExt.so.1", "libnvToolsExt.so"}
		if p := os.Getenv("ROSEINFER_NVTX_LIB"); p != "" { // CUDA 13 toolkits no longer ship the library
			names = []string{p}
		}
		lib, err := openLibrary("libnvToolsExt (NVTX)", names, false)
		if err != nil {
			fmt.Fprintf(os.Stderr, "roseinfer: ROSEINFER_NVTX=1 but %v; no NVTX ranges\n", err)
			return
		}
		n := &nvtxLib{names: map[string]uintptr{}}
		if err := lib.symbols(map[*uintptr][]string{&n.start: {"nvtxRangeStartA"}, &n.end: {"nvtxRangeEnd"}}); err != nil {
			fmt.Fprintf(os.Stderr, "roseinfer: %v; no NVTX ranges\n", err)
			return
		}
		if n.arena, err = newCArena(1 << 16); err != nil {
			return
		}
		nvtxL = n
	})
	return nvtxL
}

// NVTXEnabled reports whether NVTX ranges are being emitted.
func NVTXEnabled() bool { return nvtx() != nil }

// NVTXPush opens a range named name (no-op when NVTX is off); NVTXPop closes
// the innermost one. Names are copied to C memory once and reused.
func NVTXPush(name string) {
	n := nvtx()
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	p, ok := n.names[name]
	if !ok {
		var err error
		if p, err = n.arena.cString(name); err != nil {
			p = 0 // arena full: the range is still timed, unnamed
		}
		n.names[name] = p
	}
	id, _, _ := purego.SyscallN(n.start, p)
	n.open = append(n.open, uint64(id))
}

// NVTXPop closes the range the last unclosed NVTXPush opened.
func NVTXPop() {
	n := nvtx()
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.open) == 0 {
		return
	}
	id := n.open[len(n.open)-1]
	n.open = n.open[:len(n.open)-1]
	purego.SyscallN(n.end, uintptr(id))
}

// NVTXObserver returns a phase.Observer that brackets each engine phase with
// an NVTX range ("forward decode", "schedule", ...), or nil when NVTX is off,
// so it can go straight into phase.Multi.
func NVTXObserver() phase.Observer {
	if !NVTXEnabled() {
		return nil
	}
	return nvtxObserver{}
}

type nvtxObserver struct{}

// phaseNames: "<phase>" and "<phase> <kind>" for every phase and batch kind,
// built once so Begin does not allocate.
var phaseNames = func() map[phase.Phase]map[string]string {
	m := map[phase.Phase]map[string]string{}
	for p := phase.Phase(0); p < phase.NumPhases; p++ {
		m[p] = map[string]string{"": p.String()}
		for _, k := range []string{"prefill", "decode", "mixed"} {
			m[p][k] = p.String() + " " + k
		}
	}
	return m
}()

func (nvtxObserver) Begin(p phase.Phase, b *phase.Batch) {
	kind := ""
	if b != nil && p != phase.Step && p != phase.Schedule {
		kind = b.Kind()
	}
	name, ok := phaseNames[p][kind]
	if !ok {
		name = p.String()
	}
	NVTXPush(name)
}

func (nvtxObserver) End(phase.Phase, *phase.Batch) { NVTXPop() }
