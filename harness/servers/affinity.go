package servers

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// Affinity is this process's CPU set and GOMAXPROCS as they were before
// ApplyCPUSplit pinned it to the client's CPUs. Work that runs in the same
// process after the replay — bench online --offline's in-process engine —
// restores it first, or it would run on the client's half of the machine
// (one core of two) and measure half the throughput `bench offline` does.
type Affinity struct {
	set   unix.CPUSet
	procs int
}

// SaveAffinity records the process's CPUs and GOMAXPROCS.
func SaveAffinity() (Affinity, error) {
	var a Affinity
	if err := unix.SchedGetaffinity(0, &a.set); err != nil {
		return a, fmt.Errorf("read CPU affinity: %w", err)
	}
	a.procs = runtime.GOMAXPROCS(0)
	return a, nil
}

// Restore gives every thread of the process the saved CPUs back and resets
// GOMAXPROCS.
func (a Affinity) Restore() error {
	if err := setThreadAffinity(&a.set); err != nil {
		return fmt.Errorf("restore CPU affinity: %w", err)
	}
	runtime.GOMAXPROCS(a.procs)
	return nil
}

// setThreadAffinity sets every thread's CPU set: the Go runtime runs
// goroutines on all of its threads, and a thread it starts later inherits
// the set of the thread that starts it.
func setThreadAffinity(set *unix.CPUSet) error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, set); err != nil {
			return err
		}
	}
	return nil
}
