package profile

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gprofile "github.com/google/pprof/profile"

	"github.com/roseinfer/roseinfer/harness/backend/backendtest"
	"github.com/roseinfer/roseinfer/harness/offline"
	"github.com/roseinfer/roseinfer/harness/report"
	"github.com/roseinfer/roseinfer/harness/servers"
	"github.com/roseinfer/roseinfer/harness/workload"
	"github.com/roseinfer/roseinfer/results"
)

// TestOnlineRoseinferAllTools is the CPU acceptance check: the profile
// stage against the real `roseinfer serve --device sim` with --profile all
// and no nsys on the machine. torch and pprof captures leave files that
// parse (pprof with the pprof profile package, trace.json as a Chrome
// trace with the engine's phases); nsys fails with profile_error and the
// stage goes on.
func TestOnlineRoseinferAllTools(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs roseinfer")
	}
	in := OnlineInput{
		Servers: servers.Options{Backends: []string{"roseinfer"}, RoseinferBin: backendtest.Roseinfer(t), Device: "sim",
			ServerArgs: []string{"--sim-step-us", "2000"}, Host: "127.0.0.1",
			PortBase: 30000 + int(time.Now().UnixNano()%20000), TimeoutReady: 120 * time.Second,
			// The default CPU split would pin this test process for the tests after it.
			ServerCPUs: servers.NoPinning, ClientCPUs: servers.NoPinning},
		Workload: workload.Options{TracePath: backendtest.EvenBurstTrace(t, 40, 50, 64, 16), N: 40, MaxOutputLen: 16,
			PromptOverheadTokens: 8, ModelMaxLen: 1024, VocabSize: 50257, PrefixMode: "base", Seed: 42,
			Temperature: 0.7, TopP: 0.9, TopK: 50, IgnoreEOS: true,
			WarmupRequests: 2, WarmupInputLen: 128, WarmupOutputLen: 4},
		StartOffsetS:   0.1,
		RequestTimeout: 600 * time.Second,
		OutputDir:      t.TempDir(),
	}

	p := DefaultOptions()
	p.Profile, p.Only, p.N, p.Scale = "all", true, 12, 1
	p.NsysBin = filepath.Join(t.TempDir(), "nsys") // not there
	p.TorchNumSteps = 0                            // every step
	var log bytes.Buffer
	in.Log = &log
	rep, err := Online(context.Background(), p, in)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(log.String())
	m, err := results.LoadProfileManifest(rep.ManifestPath)
	if err != nil {
		t.Fatal(err)
	}
	runs := runByKey(m)
	if len(m.Runs) != 3 || len(rep.Failures) != 1 {
		t.Fatalf("runs %d, failures %v", len(m.Runs), rep.Failures)
	}
	if r := runs["nsys/roseinfer"]; r.ProfileError == nil || !strings.HasPrefix(*r.ProfileError, "nsys not available") {
		t.Errorf("nsys run: %+v", r)
	}
	for _, tool := range []string{ToolTorch, ToolPprof} {
		r := runs[tool+"/roseinfer"]
		if r.ProfileError != nil {
			t.Fatalf("%s: %s", tool, *r.ProfileError)
		}
		if r.NumRequests != 12 || r.NumSuccess != 12 {
			t.Errorf("%s: %d of %d requests succeeded", tool, r.NumSuccess, r.NumRequests)
		}
		kinds := map[string]string{}
		for _, f := range r.Files {
			if _, err := os.Stat(f.Path); err != nil {
				t.Errorf("%s: %v", tool, err)
			}
			kinds[f.Kind] = f.Path
		}
		checkChromeTrace(t, tool, kinds["chrome_trace"])
		if tool == ToolTorch && len(r.Files) != 1 {
			t.Errorf("torch: files %+v, want trace.json only", r.Files)
		}
		if tool != ToolPprof {
			continue
		}
		for _, kind := range []string{"pprof_cpu", "pprof_goroutine", "pprof_block", "pprof_mutex"} {
			checkPprof(t, kind, kinds[kind])
		}
		if len(r.Pprof) != 4 || r.Trace == nil {
			t.Errorf("pprof: %d pprof summaries, trace summary %v", len(r.Pprof), r.Trace)
		}
		for _, s := range r.Pprof {
			if s.Kind == "pprof_goroutine" && (s.Total == 0 || len(s.Top) == 0) {
				t.Errorf("goroutine summary empty: %+v", s)
			}
		}
		var stop struct {
			Status   string
			NumSteps int64 `json:"num_steps"`
		}
		if err := json.Unmarshal(r.StopProfile, &stop); err != nil || stop.Status != "ok" || stop.NumSteps == 0 {
			t.Errorf("stop_profile answer %s: %v", r.StopProfile, err)
		}
	}
	if _, err := os.Stat(filepath.Join(rep.RunDir, "roseinfer.profile_pprof.server.log")); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(filepath.Join(rep.RunDir, results.OnlineResultsFile)); err == nil {
		t.Error("--profile-only wrote benchmark results")
	}
}

// checkChromeTrace parses path as a Chrome trace and checks it has the
// engine's phases with plausible counts.
func checkChromeTrace(t *testing.T, tool, path string) {
	t.Helper()
	s, err := report.SummarizeChromeTrace(path)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	counts := map[string]int{}
	for _, p := range s.Phases {
		if p.Track == "engine loop" {
			counts[p.Name] += p.Count
		}
	}
	forwards := counts["forward/prefill"] + counts["forward/decode"] + counts["forward/mixed"]
	if counts["step"] == 0 || counts["schedule"] != counts["step"] || forwards == 0 || counts["emit"] != forwards ||
		counts["forward/decode"] == 0 {
		t.Errorf("%s: trace phases %v", tool, counts)
	}
}

func checkPprof(t *testing.T, kind, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("%s: %v", kind, err)
	}
	defer f.Close()
	p, err := gprofile.Parse(f)
	if err == nil {
		err = p.CheckValid()
	}
	if err != nil {
		t.Errorf("%s: %s: %v", kind, path, err)
	}
}

// TestOfflineRoseinferTorch profiles both offline labels with the torch
// tool: each gets a fresh server, a batch of fixed-length prompts, and a
// trace.json with the engine's phases.
func TestOfflineRoseinferTorch(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs roseinfer")
	}
	bench := offline.Default()
	bench.RoseinferBin = backendtest.Roseinfer(t)
	bench.Device = "sim"
	bench.SimStep = time.Millisecond
	bench.WarmupPrompts = 1
	bench.PortBase = 30000 + int(time.Now().UnixNano()%20000)
	bench.OutputDir = t.TempDir()
	p := DefaultOptions()
	p.Profile, p.NumPrompts, p.InputLen, p.OfflineOutLen = "torch", 4, 32, 8
	rep, err := Offline(context.Background(), p, OfflineInput{Bench: bench})
	if err != nil {
		t.Fatal(err)
	}
	m, err := results.LoadProfileManifest(rep.ManifestPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Runs) != 2 || len(rep.Failures) != 0 || m.Meta["profile_num_prompts"] != 4.0 {
		t.Fatalf("runs %+v, failures %v, meta %v", m.Runs, rep.Failures, m.Meta)
	}
	for _, r := range m.Runs {
		if r.NumSuccess != 4 || len(r.Files) != 1 {
			t.Errorf("%s: %d ok, files %+v", r.Backend, r.NumSuccess, r.Files)
		}
		checkChromeTrace(t, r.Backend, r.Files[0].Path)
		if !strings.Contains(strings.Join(r.Cmd, " "), "--sim-step-us 1000") {
			t.Errorf("%s: cmd %q lacks the run's engine flags", r.Backend, r.Cmd)
		}
	}
}
