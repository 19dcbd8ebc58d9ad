package servers

import (
	"runtime"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// Pinning the client and restoring gives the process every CPU back.
func TestAffinityRestore(t *testing.T) {
	saved, err := SaveAffinity()
	if err != nil {
		t.Fatal(err)
	}
	var cpus []int
	for c := 0; c < len(saved.set)*64; c++ {
		if saved.set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) < 2 {
		t.Skip("one CPU: nothing to pin away")
	}
	defer saved.Restore()
	if err := pinClient(strconv.Itoa(cpus[len(cpus)-1])); err != nil {
		t.Fatal(err)
	}
	var now unix.CPUSet
	if err := unix.SchedGetaffinity(0, &now); err != nil || now.Count() != 1 || runtime.GOMAXPROCS(0) != 1 {
		t.Fatalf("pinned: %d CPUs, GOMAXPROCS %d, err %v", now.Count(), runtime.GOMAXPROCS(0), err)
	}
	if err := saved.Restore(); err != nil {
		t.Fatal(err)
	}
	if err := unix.SchedGetaffinity(0, &now); err != nil || now != saved.set || runtime.GOMAXPROCS(0) != saved.procs {
		t.Errorf("restored: %d CPUs (want %d), GOMAXPROCS %d (want %d), err %v",
			now.Count(), saved.set.Count(), runtime.GOMAXPROCS(0), saved.procs, err)
	}
}
