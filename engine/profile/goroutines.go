package profile

import (
	"fmt"
	"time"

	gprofile "github.com/google/pprof/profile"
)

// goroutineSampler sums goroutine snapshots taken every interval during a
// capture. A single snapshot at stop would show an idle server (the
// harness stops the capture after its requests finished); the sum shows
// where goroutines spent the capture, weighted by time.
type goroutineSampler struct {
	done   chan struct{}
	result chan samplerResult
}

type samplerResult struct {
	prof *gprofile.Profile
	n    int
	err  error
}

func startGoroutineSampler(interval time.Duration) *goroutineSampler {
	g := &goroutineSampler{done: make(chan struct{}), result: make(chan samplerResult, 1)}
	go g.run(interval)
	return g
}

func (g *goroutineSampler) run(interval time.Duration) {
	var sum *gprofile.Profile
	n := 0
	var firstErr error
	take := func() {
		p, err := snapshot("goroutine")
		if err == nil && sum != nil {
			p, err = gprofile.Merge([]*gprofile.Profile{sum, p})
		}
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			return
		}
		sum = p
		n++
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	take()
	for {
		select {
		case <-t.C:
			take()
		case <-g.done:
			take()
			g.result <- samplerResult{sum, n, firstErr}
			return
		}
	}
}

// stop takes a last snapshot and returns the sum.
func (g *goroutineSampler) stop() (*gprofile.Profile, error) {
	close(g.done)
	r := <-g.result
	if r.prof == nil {
		return nil, fmt.Errorf("no goroutine snapshot: %v", r.err)
	}
	r.prof.Comments = append(r.prof.Comments,
		fmt.Sprintf("goroutine counts summed over %d snapshots taken during the capture", r.n))
	return r.prof, nil
}
