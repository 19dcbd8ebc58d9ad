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
// core each, so the server's work never delays the client's sends and
// timestamps. "none" turns pinning off. It returns a note for the log, or
// "".
//
// The sim device gets the split too. It computes nothing, but it writes:
// with 2,000 streams on 2 cores each 50 ms step is a burst of 2,000 chunks,
// and sharing the cores, the server's threads held both CPUs while the
// dispatcher's timer fired (an execution trace showed bench running no
// goroutine at all for 1-3 ms), so sends due in a burst ran 4-7 ms late.
// On a core of its own the
// client's one P (GOMAXPROCS 1) checks the dispatcher's timer at every
// goroutine switch and runs it next. cpu_numbers.sh sim on 2 cores,
// this default and the shared cores (d2bfbb4) alternating, 6 runs each
// (2026-11-27): send lag p99 at 2,000 streams 0.04-0.09 ms (1.3 in one)
// against 4.1-5.4 (INVALID in 2); 500 req/s 0.04-0.08 against 0.13-0.24;
// 200 req/s 0.05-0.11 against 0.16-0.26; TPOT and ITL p50 unchanged. The
// cost: pinned, neither side can move away from other work on its core
// (with a busy loop beside them, 500 req/s send lag p99 2.5-4.0 ms split,
// 0.4-1.0 shared). (With the net/http client, whose goroutine hand-offs
// all waited for the one P, sharing was the better choice: 200 req/s p99
// 0.4-0.8 ms shared, 2.0-2.3 split, 2026-11-22.)
func resolveCPUs(o *Options) (string, error) {
	if o.ServerCPUs == NoPinning || o.ClientCPUs == NoPinning {
		o.ServerCPUs, o.ClientCPUs = "", ""
		return "", nil
	}
	if o.ServerCPUs != "" || o.ClientCPUs != "" || o.BaseURL != "" {
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
