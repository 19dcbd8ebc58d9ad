//go:build cudalab

package cuda

import (
	"testing"

	"github.com/ebitengine/purego"
)

// labTimeUs runs launch once (a warm-up: plans, first-touch costs), then
// reps times between two events on g's stream, and returns the mean time
// of one in microseconds.
func labTimeUs(t *testing.T, g *gpu, reps int, launch func() error) float64 {
	t.Helper()
	start, err := g.drv.eventCreate(0)
	if err != nil {
		t.Fatal(err)
	}
	defer purego.SyscallN(g.drv.cuEventDestroy, start)
	end, err := g.drv.eventCreate(0)
	if err != nil {
		t.Fatal(err)
	}
	defer purego.SyscallN(g.drv.cuEventDestroy, end)
	if err := launch(); err != nil {
		t.Fatal(err)
	}
	if err := g.drv.eventRecord(start, g.stream); err != nil {
		t.Fatal(err)
	}
	for range reps {
		if err := launch(); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.drv.eventRecord(end, g.stream); err != nil {
		t.Fatal(err)
	}
	if err := g.sync(); err != nil {
		t.Fatal(err)
	}
	ms, err := g.drv.eventElapsedMs(start, end)
	if err != nil {
		t.Fatal(err)
	}
	return float64(ms) * 1000 / float64(reps)
}
