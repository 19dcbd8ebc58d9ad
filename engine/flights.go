package engine

import (
	"github.com/roseinfer/roseinfer/engine/device"
	"github.com/roseinfer/roseinfer/engine/scheduler"
)

// maxFlights is how many steps can be on the device at once: the one being
// collected and the one submitted before collecting it (the CUDA device's
// limit too).
const maxFlights = 2

// flight is one submitted step.
type flight struct {
	plan    []scheduler.Scheduled // own copy: the scheduler reuses its plan slice
	sampled []device.Sampled      // the step's samples once collected
	err     error                 // the submit (or, synchronously, the forward) failed
}

// flights is a FIFO of submitted steps on a ring whose buffers are reused,
// so the loop allocates nothing once warm.
type flights struct {
	ring    [maxFlights]flight
	head, n int
}

// push appends a copy of plan as the newest flight and returns it.
func (fs *flights) push(plan []scheduler.Scheduled) *flight {
	if fs.n == maxFlights {
		panic("engine: more than two steps in flight") // the loop collects before it submits a third
	}
	f := &fs.ring[(fs.head+fs.n)%maxFlights]
	f.plan = append(f.plan[:0], plan...)
	f.sampled, f.err = f.sampled[:0], nil
	fs.n++
	return f
}

// newest is the flight pushed last; only valid when n > 0.
func (fs *flights) newest() *flight { return &fs.ring[(fs.head+fs.n-1)%maxFlights] }

// pop removes and returns the oldest flight. It stays valid until the next
// push.
func (fs *flights) pop() *flight {
	f := &fs.ring[fs.head]
	fs.head = (fs.head + 1) % maxFlights
	fs.n--
	return f
}
