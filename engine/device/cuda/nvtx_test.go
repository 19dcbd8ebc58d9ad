package cuda

import (
	"os"
	"runtime"
	"sync"
	"testing"

	"github.com/roseinfer/roseinfer/engine/profile/phase"
)

// TestNVTXObserver: with ROSEINFER_NVTX unset the observer is nil (the
// engine then pays nothing); with ROSEINFER_NVTX=1 on a machine with
// libnvToolsExt, ranges opened and closed from goroutines that hop between
// threads balance (start/end ranges, so a thread switch inside one is fine).
func TestNVTXObserver(t *testing.T) {
	for p := phase.Phase(0); p < phase.NumPhases; p++ {
		for _, k := range []string{"", "prefill", "decode", "mixed"} {
			if phaseNames[p][k] == "" {
				t.Errorf("no NVTX name for phase %v kind %q", p, k)
			}
		}
	}
	if os.Getenv("ROSEINFER_NVTX") != "1" {
		if NVTXObserver() != nil || NVTXEnabled() {
			t.Fatal("NVTX on without ROSEINFER_NVTX=1")
		}
		NVTXPush("ignored") // no-ops
		NVTXPop()
		return
	}
	if !NVTXEnabled() {
		t.Skip("ROSEINFER_NVTX=1 but no libnvToolsExt here")
	}
	obs := NVTXObserver()
	if obs == nil {
		t.Fatal("NVTX enabled but no observer")
	}
	var wg sync.WaitGroup
	var mu sync.Mutex // the engine calls its observer from one goroutine at a time
	for i := 0; i < 8; i++ {
		wg.Go(func() {
			for j := 0; j < 200; j++ {
				mu.Lock()
				b := &phase.Batch{Step: int64(j), NumDecodeSeqs: 1}
				obs.Begin(phase.Step, b)
				obs.Begin(phase.Forward, b)
				runtime.Gosched()
				obs.End(phase.Forward, b)
				obs.End(phase.Step, b)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if n := len(nvtx().open); n != 0 {
		t.Fatalf("%d NVTX ranges left open", n)
	}
}
