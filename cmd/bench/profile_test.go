package main

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	gprofile "github.com/google/pprof/profile"

	"github.com/roseinfer/roseinfer/harness/report"
	"github.com/roseinfer/roseinfer/results"
)

// runBench runs the test binary as bench with args and returns its exit
// code and output.
func runBench(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(args)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "BENCH_TEST_ARGS="+string(raw))
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}

// TestProfileOnlyPprof is the profile stage's acceptance check on a CPU
// machine: bench online --profile pprof --profile-only --backends roseinfer
// writes a manifest whose files exist and parse.
func TestProfileOnlyPprof(t *testing.T) {
	if testing.Short() {
		t.Skip("runs roseinfer")
	}
	bin := buildRoseinfer(t)
	out := t.TempDir()
	code, stdout, stderr := runBench(t, "online", "--profile", "pprof", "--profile-only", "--backends", "roseinfer",
		"--device", "sim", "--roseinfer-bin", bin, "--output-dir", out, "--profile-n", "6", "--profile-scale", "0.05",
		"--warmup-requests", "1", "--max-output-len", "16", "--port-base", strconv.Itoa(30000+rand.IntN(20000)))
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	manifest := strings.Fields(stdout)[0]
	if filepath.Base(manifest) != results.ProfileManifestFile {
		t.Fatalf("stdout %q", stdout)
	}
	m, err := results.LoadProfileManifest(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Runs) != 1 || m.Runs[0].ProfileError != nil || m.Runs[0].NumSuccess != 6 {
		t.Fatalf("runs %+v", m.Runs)
	}
	kinds := map[string]bool{}
	for _, f := range m.Runs[0].Files {
		kinds[f.Kind] = true
		if f.Kind == "chrome_trace" {
			s, err := report.SummarizeChromeTrace(f.Path)
			if err != nil || s.NumEvents == 0 {
				t.Errorf("%s: %v (%d events)", f.Path, err, s.NumEvents)
			}
			continue
		}
		fh, err := os.Open(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := gprofile.Parse(fh); err != nil {
			t.Errorf("%s: %v", f.Path, err)
		}
		fh.Close()
	}
	for _, k := range []string{"chrome_trace", "pprof_cpu", "pprof_goroutine", "pprof_block", "pprof_mutex"} {
		if !kinds[k] {
			t.Errorf("no %s file in %v", k, kinds)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(manifest), results.OnlineResultsFile)); err == nil {
		t.Error("--profile-only ran the benchmark")
	}
}

// TestProfileOnlyCPUSplit checks that --profile-only gives the profiled
// server the benchmark's default CPU split (taskset on the first half),
// as the stage does after a benchmark that chose it.
func TestProfileOnlyCPUSplit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs roseinfer")
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Skip("no taskset: the split is skipped")
	}
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: nothing to split")
	}
	bin := buildRoseinfer(t)
	out := t.TempDir()
	code, stdout, stderr := runBench(t, "online", "--profile", "pprof", "--profile-only", "--backends", "roseinfer",
		"--device", "cpu", "--roseinfer-bin", bin, "--output-dir", out, "--profile-n", "2", "--profile-scale", "0.05",
		"--warmup-requests", "1", "--warmup-output-len", "2", "--max-output-len", "4",
		"--port-base", strconv.Itoa(30000+rand.IntN(20000)))
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "CPU split: servers on") {
		t.Errorf("no CPU split note in the log:\n%s", stderr)
	}
	m, err := results.LoadProfileManifest(strings.Fields(stdout)[0])
	if err != nil {
		t.Fatal(err)
	}
	cpus, _ := m.Meta["server_cpus"].(string)
	if cpus == "" || len(m.Runs) != 1 {
		t.Fatalf("meta.server_cpus %v, %d runs, want the split and one run", m.Meta["server_cpus"], len(m.Runs))
	}
	cmd := m.Runs[0].Cmd
	if len(cmd) < 3 || filepath.Base(cmd[0]) != "taskset" || cmd[1] != "-c" || cmd[2] != cpus {
		t.Errorf("profiled server's argv %q, want it pinned with taskset -c %s", cmd, cpus)
	}
}

func TestProfileFlagErrors(t *testing.T) {
	code, _, stderr := runBench(t, "online", "--profile-only")
	if code != exitFailed || !strings.Contains(stderr, "--profile-only needs --profile") {
		t.Errorf("exit %d: %s", code, stderr)
	}
	code, _, stderr = runBench(t, "offline", "--profile", "perf")
	if code != exitFailed || !strings.Contains(stderr, `--profile "perf"`) {
		t.Errorf("exit %d: %s", code, stderr)
	}
}
