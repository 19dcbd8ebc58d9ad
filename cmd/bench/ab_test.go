package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/harness/ab"
	"github.com/roseinfer/roseinfer/harness/backend/backendtest"
)

func TestABFlagErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--a", "x"}, "--a and --b are both required"},
		{[]string{"--a", "http://127.0.0.1:1", "--b", "http://127.0.0.1:1", "--fail-on", "tpot>+5%"}, "unknown metric"},
		{[]string{"--from", t.TempDir(), "--a", "x"}, "--from judges a finished run: --a does not apply"},
		{[]string{"--from", t.TempDir()}, "online_results.json"},
		{[]string{"--a", "http://127.0.0.1:1", "--b", "http://127.0.0.1:1", "--rounds", "1"}, "--rounds 1"},
		{[]string{"--a", "http://127.0.0.1:1", "--b", "http://127.0.0.1:1", "--scales", "x"}, "--scales"},
		{[]string{"--a", "http://127.0.0.1:1", "--b", "http://127.0.0.1:1", "--a-args", "'open"}, "--a-args: unterminated"},
		{[]string{"--a", "http://127.0.0.1:1", "--b", "ab.go"}, "--b ab.go: not an executable file"},
		{[]string{"--a", "http://127.0.0.1:1", "--b", "no-such-rev-xyz"}, `--b "no-such-rev-xyz": not a URL`},
	}
	for _, c := range cases {
		out, code := execBench(t, append([]string{"ab"}, c.args...)...)
		if code != exitUnusable || !strings.Contains(out, c.want) {
			t.Errorf("bench ab %s: exit %d, output %q; want exit %d and %q", strings.Join(c.args, " "), code, out, exitUnusable, c.want)
		}
	}
}

// The command end to end on the sim device: the same binary with a 20%
// longer step on B exits 1 with TPOT flagged; the run judged again with
// --from and no rules exits 0; --json parses. Four rounds a side keep it
// short; the rule is on TPOT's median, which two ABBA blocks pin down even
// when make test loads the machine (its tail is harness/ab's test, with 16).
func TestABCommandFlagsSlowerStep(t *testing.T) {
	bin := buildRoseinfer(t)
	rng := rand.New(rand.NewPCG(3, 4))
	at := 0.0
	trace := backendtest.BurstTrace(t, 20, func(int) (float64, int, int) {
		at += rng.ExpFloat64() / 150
		return at, 64, 24
	})
	outDir := t.TempDir()
	out, code := execBench(t, "ab", "--a", bin, "--b", bin, "--b-args", "--sim-step-us 1200", "--device", "sim",
		"--server-args", "--sim-step-us 1000", "--trace", trace, "--n", "20", "--scales", "1", "--rounds", "4",
		"--start-offset-s", "0.05", "--ignore-eos", "--warmup-requests", "2", "--bootstrap-iterations", "500",
		"--fail-on", "tpot_ms.p50>+10%",
		"--server-cpus", "none", "--port-base", fmt.Sprint(backendtest.PortBase(t)), "--output-dir", outDir)
	if code != exitRegression || !strings.Contains(out, "**REGRESSION**") || !strings.Contains(out, "| tpot_ms.p50 |") {
		t.Fatalf("exit %d, want %d with TPOT flagged:\n%s", code, exitRegression, out)
	}
	runs, _ := filepath.Glob(filepath.Join(outDir, "ab_*"))
	if len(runs) != 1 {
		t.Fatalf("run directories %v, want one", runs)
	}
	out, code = execBench(t, "ab", "--from", runs[0], "--fail-on", "none", "--bootstrap-iterations", "500")
	if code != 0 || !strings.Contains(out, "no rules: ratios for information only") {
		t.Errorf("--from --fail-on none: exit %d, want 0:\n%s", code, out)
	}
	report := filepath.Join(t.TempDir(), "ab.json")
	out, code = execBench(t, "ab", "--from", runs[0], "--fail-on", "tpot_ms.p50>+10%", "--json", "--output", report)
	var res ab.Result
	if err := json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &res); err != nil || code != exitRegression || res.Regressions != 1 {
		t.Errorf("--from --json: exit %d, %d regressions, err %v:\n%s", code, res.Regressions, err, out)
	}
	if _, err := os.Stat(report); err != nil {
		t.Errorf("--output: %v", err)
	}
}

func TestHistoryCommand(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "history.jsonl")
	for range 2 {
		if out, code := execBench(t, "history", "--file", file, "--add", fixtureDir+"report_ours_online.json"); code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	}
	out, code := execBench(t, "history", "--file", file, "--output-dir", dir)
	if code != 0 || !strings.Contains(out, "2 runs") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "history.svg")); err != nil {
		t.Error(err)
	}
	if out, code := execBench(t, "history", "--file", file, "--add", "ab.go"); code == 0 || !strings.Contains(out, "--add") {
		t.Errorf("--add of a file that is not results: exit %d:\n%s", code, out)
	}
}
