package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/roseinfer/roseinfer/harness/backend/backendtest"
	"github.com/roseinfer/roseinfer/results"
)

// With BENCH_TEST_ARGS set, the test binary is bench itself: the signal
// tests run it as a child process, as a user's shell would.
func TestMain(m *testing.M) {
	if raw := os.Getenv("BENCH_TEST_ARGS"); raw != "" {
		var args []string
		if err := json.Unmarshal([]byte(raw), &args); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Args = append([]string{"bench"}, args...)
		os.Exit(runMain())
	}
	os.Exit(m.Run())
}

// buildRoseinfer builds cmd/roseinfer into a test directory ($ROSEINFER_BIN
// names a prebuilt one instead).
func buildRoseinfer(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("ROSEINFER_BIN"); p != "" {
		// A prebuilt binary, copied: the tests find leftover processes by
		// the binary's path, which must be this test's alone.
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(t.TempDir(), "roseinfer")
		if err := os.WriteFile(bin, data, 0o755); err != nil {
			t.Fatal(err)
		}
		return bin
	}
	return backendtest.Roseinfer(t)
}

// processesRunning lists live processes whose command line mentions s.
func processesRunning(s string) []string {
	var found []string
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil || len(data) == 0 { // gone, or a zombie
			continue
		}
		cmdline := strings.ReplaceAll(string(data), "\x00", " ")
		if strings.Contains(cmdline, s) {
			found = append(found, filepath.Base(filepath.Dir(p))+": "+cmdline)
		}
	}
	return found
}

// lockedBuffer collects a child's output while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startBench runs `bench online` against the sim device as a child process
// and waits until the first requests are in flight.
func startBench(t *testing.T, bin, outDir string) (*exec.Cmd, *lockedBuffer) {
	t.Helper()
	tracePath := backendtest.EvenBurstTrace(t, 400, 20, 16, 64) // 20 req/s for 20 s
	args, _ := json.Marshal([]string{"online", "--device", "sim", "--server-args", "--sim-step-us 1000",
		"--roseinfer-bin", bin, "--trace", tracePath, "--n", "400", "--scales", "1,1", "--ignore-eos",
		"--warmup-requests", "1", "--start-offset-s", "0.1", "--port-base", strconv.Itoa(backendtest.PortBase(t)), "--output-dir", outDir})
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "BENCH_TEST_ARGS="+string(args))
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		for _, p := range processesRunning(bin) {
			t.Errorf("left running: %s", p)
		}
	})
	// Wait for the replay: the server is up and requests are flowing.
	deadline := time.Now().Add(90 * time.Second)
	for !strings.Contains(out.String(), "replaying") && !strings.Contains(out.String(), "done") {
		if time.Now().After(deadline) {
			t.Fatalf("bench did not start replaying:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // about 18 requests sent
	if len(processesRunning(bin)) == 0 {
		t.Fatalf("no roseinfer process while replaying:\n%s", out.String())
	}
	return cmd, out
}

func waitExit(t *testing.T, cmd *exec.Cmd, within time.Duration, out *lockedBuffer) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(within):
		cmd.Process.Kill()
		t.Fatalf("bench did not exit within %v:\n%s", within, out.String())
	}
	return -1
}

// checkPartial asserts that the run left a valid partial results file.
func checkPartial(t *testing.T, outDir string) {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(outDir, "online_*", results.OnlineResultsFile))
	if len(paths) != 1 {
		t.Fatalf("results files %v, want one", paths)
	}
	on, err := results.LoadOnline(paths[0])
	if err != nil {
		t.Fatalf("partial results unreadable: %v", err)
	}
	if on.Meta["interrupted"] != true {
		t.Errorf("meta.interrupted = %v", on.Meta["interrupted"])
	}
	b := on.ByBackend["roseinfer"]
	if b == nil || len(b.Runs) != 1 || len(b.Runs[0].RequestMetrics) == 0 || len(b.Runs[0].RequestMetrics) == 400 {
		t.Fatalf("want the first scale's requests sent before the interrupt, got %+v", b)
	}
	if s := on.Summaries[0]; s.Valid || !strings.Contains(s.InvalidReason, "interrupted") {
		t.Errorf("the interrupted scale must be marked invalid: %q", s.InvalidReason)
	}
}

// First Ctrl-C: stop sending, drain, stop the server, write partial results,
// exit 130, no child left.
func TestInterruptDrainsAndLeavesNoProcess(t *testing.T) {
	bin := buildRoseinfer(t)
	outDir := t.TempDir()
	cmd, out := startBench(t, bin, outDir)
	cmd.Process.Signal(syscall.SIGINT)
	if code := waitExit(t, cmd, 60*time.Second, out); code != exitInterrupted {
		t.Fatalf("exit code %d, want %d:\n%s", code, exitInterrupted, out.String())
	}
	if left := processesRunning(bin); len(left) != 0 {
		t.Fatalf("processes left after Ctrl-C: %v", left)
	}
	checkPartial(t, outDir)
}

// Second Ctrl-C: abort requests in flight and exit at once, still leaving
// no child and a valid file.
func TestSecondInterruptExitsNow(t *testing.T) {
	bin := buildRoseinfer(t)
	outDir := t.TempDir()
	cmd, out := startBench(t, bin, outDir)
	cmd.Process.Signal(syscall.SIGINT)
	time.Sleep(100 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	if code := waitExit(t, cmd, 15*time.Second, out); code != exitInterrupted {
		t.Fatalf("exit code %d, want %d:\n%s", code, exitInterrupted, out.String())
	}
	if left := processesRunning(bin); len(left) != 0 {
		t.Fatalf("processes left after two Ctrl-C: %v", left)
	}
	checkPartial(t, outDir)
}

// TestAPIKeyFlagWinsOverEnv: --api-key wins over $OPENAI_API_KEY, even when
// given empty; without the flag the environment's key is used, and the help
// never shows it.
func TestAPIKeyFlagWinsOverEnv(t *testing.T) {
	t.Setenv(apiKeyEnv, "sk-from-env")
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "sk-from-env"},
		{[]string{"--api-key", "sk-flag"}, "sk-flag"},
		{[]string{"--api-key", ""}, ""},
	} {
		var got string
		cmd := &cobra.Command{Use: "x", RunE: func(cmd *cobra.Command, _ []string) error { return nil }}
		registerAPIKey(cmd, &got)
		if err := cmd.ParseFlags(c.args); err != nil {
			t.Fatal(err)
		}
		if k := apiKey(cmd, got); k != c.want {
			t.Errorf("%v: key %q, want %q", c.args, k, c.want)
		}
	}
	for _, sub := range []string{"online", "offline"} {
		out, _ := execBench(t, sub, "--help")
		if !strings.Contains(out, "--api-key") || strings.Contains(out, "sk-from-env") {
			t.Errorf("bench %s --help: want --api-key and never the key itself", sub)
		}
	}
}
