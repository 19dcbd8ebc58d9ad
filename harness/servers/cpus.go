package servers

import (
	"fmt"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/roseinfer/roseinfer/harness/cpuset"
)

// NoPinning is the --server-cpus / --client-cpus value that turns the
// default CPU split off.
const NoPinning = "none"

// ApplyCPUSplit settles where the harness and the servers it launches run:
// the default split when no list is given (resolveCPUs), this process
// pinned to the client's CPUs, and the taskset prefix for the servers (nil
// when they are not pinned). It returns a note for the log, or "". The
// benchmark and bench online's profile stage both go through it, so
// profiled servers run where measured ones do.
func ApplyCPUSplit(o *Options) (prefix []string, note string, err error) {
	if note, err = resolveCPUs(o); err != nil {
		return nil, "", err
	}
	if err := pinClient(o.ClientCPUs); err != nil {
		return nil, note, err
	}
	prefix, err = serverPrefix(o.ServerCPUs)
	return prefix, note, err
}

// resolveCPUs applies the original's default split when neither list
// is given and the harness launches the servers: of the CPUs this process
// may use, the server gets the first half (at least one) and the client the
// rest; with a single CPU both share it. On a 2-core machine that is one
// core each, so the server's compute never delays the client's timestamps.
// "none" turns pinning off. It returns a note for the log, or "".
func resolveCPUs(o *Options) (string, error) {
	if o.ServerCPUs == NoPinning || o.ClientCPUs == NoPinning {
		o.ServerCPUs, o.ClientCPUs = "", ""
		return "", nil
	}
	if o.ServerCPUs != "" || o.ClientCPUs != "" || o.BaseURL != "" {
		return "", nil
	}
	// The sim device computes nothing, so there is nothing to isolate the
	// client from, and one CPU each (GOMAXPROCS 1) makes every wake-up wait
	// for the one P: at 200 req/s on 2 cores, send lag p99 2.0-2.3 ms and
	// client - server TTFT p99 3.1-3.4 ms split, 0.4-0.8 and 0.6-0.8 ms
	// shared (2026-11-22). No split.
	if o.Device == "sim" {
		return "", nil
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		return "CPU split skipped: taskset not found", nil
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return "", fmt.Errorf("read CPU affinity: %w", err)
	}
	var cpus []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) < 2 {
		return "", nil
	}
	half := max(1, len(cpus)/2)
	o.ServerCPUs, o.ClientCPUs = cpuset.Format(cpus[:half]), cpuset.Format(cpus[half:])
	return fmt.Sprintf("CPU split: servers on %s, client on %s (--server-cpus/--client-cpus none to turn off)", o.ServerCPUs, o.ClientCPUs), nil
}

// serverPrefix is the argv prefix that pins a launched server to cpus
// (taskset, as the original), or nil when no list is given.
func serverPrefix(cpus string) ([]string, error) {
	if cpus == "" {
		return nil, nil
	}
	if _, err := cpuset.Parse(cpus); err != nil {
		return nil, fmt.Errorf("--server-cpus: %w", err)
	}
	path, err := exec.LookPath("taskset")
	if err != nil {
		return nil, fmt.Errorf("--server-cpus needs taskset (util-linux): %w", err)
	}
	return []string{path, "-c", cpus}, nil
}

// pinClient restricts the harness process (every thread; new threads
// inherit it) to cpus and sizes GOMAXPROCS to match.
func pinClient(cpus string) error {
	if cpus == "" {
		return nil
	}
	list, err := cpuset.Parse(cpus)
	if err != nil {
		return fmt.Errorf("--client-cpus: %w", err)
	}
	var set unix.CPUSet
	for _, c := range list {
		set.Set(c)
	}
	if err := setThreadAffinity(&set); err != nil {
		return fmt.Errorf("--client-cpus %s: %w", cpus, err)
	}
	runtime.GOMAXPROCS(len(list))
	return nil
}

// CPUListMeta is a CPU list for meta (the original wrote lists of ints).
func CPUListMeta(s string) any {
	if s == "" {
		return nil
	}
	list, err := cpuset.Parse(s)
	if err != nil {
		return nil
	}
	return list
}
