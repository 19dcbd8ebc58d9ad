package profile

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/harness/backend"
	"github.com/roseinfer/roseinfer/results"
)

// profileCalls returns the request paths after the warmup: the start and
// stop calls and the completions between them.
func profileCalls(evs []fakeEvent) []string {
	var out []string
	numCompletions := 0
	for _, ev := range evs {
		if ev.Event != "request" {
			continue
		}
		switch ev.Path {
		case "/v1/completions":
			if !strings.Contains(ev.Body, `"model":"fake-model"`) {
				continue // not from this test's client
			}
			numCompletions++
			if numCompletions > 1 { // the first is the warmup
				out = append(out, "completion")
			}
		case "/start_profile", "/stop_profile":
			out = append(out, ev.Path)
		}
	}
	return out
}

func runByKey(m *results.ProfileManifest) map[string]results.ProfileRun {
	out := map[string]results.ProfileRun{}
	for _, r := range m.Runs {
		out[r.Tool+"/"+r.Backend] = r
	}
	return out
}

func TestStageTorchAndNsysPerBackend(t *testing.T) {
	o := testOptions(t)
	o.NsysBin = fakeNsys(t)
	var log bytes.Buffer
	st := newTestStage(t, &o, &log)
	calls := map[string]string{}
	var specs []backend.Spec
	for _, name := range []string{"vllm", "sglang", "trtllm"} {
		calls[name] = filepath.Join(t.TempDir(), "calls.jsonl")
		specs = append(specs, fakeSpec(t, name, calls[name], nil))
	}
	if err := st.run(context.Background(), []string{ToolTorch, ToolNsys, ToolPprof}, specs); err != nil {
		t.Fatal(err)
	}
	if len(st.rep.Failures) != 0 {
		t.Fatalf("failures: %v\n%s", st.rep.Failures, log.String())
	}
	m, err := results.LoadProfileManifest(st.rep.ManifestPath)
	if err != nil {
		t.Fatal(err)
	}
	runs := runByKey(m)
	if len(m.Runs) != 6 {
		t.Fatalf("%d runs, want torch and nsys for 3 backends", len(m.Runs))
	}
	if skipped, _ := m.Meta["skipped"].([]any); len(skipped) != 3 {
		t.Errorf("meta.skipped = %v, want the 3 pprof runs", m.Meta["skipped"])
	}
	for key, r := range runs {
		if r.ProfileError != nil {
			t.Errorf("%s: %s", key, *r.ProfileError)
		}
		if r.NumRequests != 3 || r.NumSuccess != 3 || r.Port == 0 || len(r.Cmd) == 0 || r.WallS <= 0 {
			t.Errorf("%s: %+v", key, r)
		}
		if want := filepath.Join(st.runDir, r.Backend+".profile_"+r.Tool+".server.log"); r.LogPath != want {
			t.Errorf("%s: log %s, want %s", key, r.LogPath, want)
		} else if _, err := os.Stat(want); err != nil {
			t.Errorf("%s: %v", key, err)
		}
		if want := filepath.Join(st.runDir, "profiles", r.Tool, r.Backend); r.OutputDir != want {
			t.Errorf("%s: output dir %s, want %s", key, r.OutputDir, want)
		}
	}
	for _, name := range []string{"vllm", "sglang", "trtllm"} {
		r := runs["nsys/"+name]
		if r.Cmd[0] != o.NsysBin || r.NsysOutputPrefix == nil || *r.NsysOutputPrefix != filepath.Join(r.OutputDir, name) {
			t.Errorf("nsys/%s: cmd %q, prefix %v", name, r.Cmd, r.NsysOutputPrefix)
		}
		if len(r.Files) != 1 || r.Files[0].Kind != kindNsysReport || r.Files[0].Path != *r.NsysOutputPrefix+".nsys-rep" {
			t.Errorf("nsys/%s: files %+v", name, r.Files)
		}
		if runs["torch/"+name].NsysOutputPrefix != nil {
			t.Errorf("torch/%s has an nsys prefix", name)
		}
	}
	if f := runs["torch/vllm"].Files; len(f) != 1 || f[0].Kind != kindTorchTrace {
		t.Errorf("torch/vllm files %+v", f)
	}
	if f := runs["torch/trtllm"].Files; len(f) != 1 || f[0].Kind != kindTorchTrace || filepath.Base(f[0].Path) != "trace.json" {
		t.Errorf("torch/trtllm files %+v", f)
	}

	// What each server saw: per capture a start event, then requests.
	wantCalls := map[string][]string{
		"vllm":   {"/start_profile", "completion", "completion", "completion", "/stop_profile"},
		"sglang": {"/start_profile", "completion", "completion", "completion"}, // stops by itself after num_steps
		"trtllm": {"completion", "completion", "completion"},
	}
	wantArgs := map[string][]string{"vllm": {"--enable-layerwise-nvtx-tracing"}, "sglang": {"--enable-layerwise-nvtx-marker"}}
	for name, path := range calls {
		evs := readCalls(t, path)
		var starts []int
		for i, ev := range evs {
			if ev.Event == "start" {
				starts = append(starts, i)
			}
		}
		if len(starts) != 2 {
			t.Fatalf("%s: %d server starts, want 2 (torch, nsys)", name, len(starts))
		}
		torch, nsys := evs[starts[0]:starts[1]], evs[starts[1]:]
		if got := profileCalls(torch); !slices.Equal(got, wantCalls[name]) {
			t.Errorf("%s torch calls %v, want %v", name, got, wantCalls[name])
		}
		if got := profileCalls(nsys); !slices.Equal(got, []string{"completion", "completion", "completion"}) {
			t.Errorf("%s nsys calls %v", name, got)
		}
		if len(torch[0].Args) != 0 || !slices.Equal(nsys[0].Args, wantArgs[name]) {
			t.Errorf("%s server flags: torch %v, nsys %v", name, torch[0].Args, nsys[0].Args)
		}
		if torch[0].Env["ROSEINFER_NVTX"] != "1" || nsys[0].Env["ROSEINFER_NVTX"] != "1" {
			t.Errorf("%s: ROSEINFER_NVTX not set: %v", name, torch[0].Env)
		}
		for k, v := range runs["torch/"+name].Env {
			if torch[0].Env[k] != v {
				t.Errorf("%s torch: server saw %s=%q, manifest says %q", name, k, torch[0].Env[k], v)
			}
		}
	}
	if summary, err := os.ReadFile(st.rep.SummaryPath); err != nil || !strings.Contains(string(summary), "| nsys  | trtllm ") {
		t.Errorf("summary: %v\n%s", err, summary)
	}
}

func TestStageRecordsFailuresAndContinues(t *testing.T) {
	o := testOptions(t)
	o.NsysBin = fakeNsys(t)
	var log bytes.Buffer
	st := newTestStage(t, &o, &log)
	dir := t.TempDir()
	broken := fakeSpec(t, "llama", filepath.Join(dir, "llama.jsonl"), nil)
	broken.Command = func(string, int) []string { return []string{"/bin/sh", "-c", "echo no model; exit 3"} }
	specs := []backend.Spec{
		fakeSpec(t, "vllm", filepath.Join(dir, "vllm.jsonl"), map[string]string{"FAKE_PROFILE_STATUS": "404"}),
		broken,
		fakeSpec(t, "sglang", filepath.Join(dir, "sglang.jsonl"), map[string]string{"FAKE_NSYS_NO_REPORT": "1"}),
		fakeSpec(t, "trtllm", filepath.Join(dir, "trtllm.jsonl"), nil),
	}
	if err := st.run(context.Background(), []string{ToolTorch, ToolNsys}, specs); err != nil {
		t.Fatal(err)
	}
	m, err := results.LoadProfileManifest(st.rep.ManifestPath)
	if err != nil {
		t.Fatal(err)
	}
	runs := runByKey(m)
	want := map[string]string{ // profile_error prefix; "" = none
		"torch/vllm":   "start_profile failed: HTTP 404",
		"nsys/vllm":    "",
		"nsys/llama":   "server not ready: llama.profile_nsys: server exited while starting",
		"torch/sglang": "",
		"nsys/sglang":  "nsys report not produced: " + filepath.Join(st.runDir, "profiles/nsys/sglang/sglang.nsys-rep"),
		"torch/trtllm": "",
		"nsys/trtllm":  "",
	}
	if len(runs) != len(want) {
		t.Errorf("runs %v", runs)
	}
	for key, prefix := range want {
		r, ok := runs[key]
		switch {
		case !ok:
			t.Errorf("%s: no run", key)
		case prefix == "" && r.ProfileError != nil:
			t.Errorf("%s: unexpected error %s", key, *r.ProfileError)
		case prefix != "" && (r.ProfileError == nil || !strings.HasPrefix(*r.ProfileError, prefix)):
			t.Errorf("%s: profile_error %v, want it to start with %q", key, r.ProfileError, prefix)
		}
	}
	if !strings.Contains(*runs["nsys/llama"].ProfileError, "no model") {
		t.Errorf("the server's log tail is missing: %s", *runs["nsys/llama"].ProfileError)
	}
	if len(st.rep.Failures) != 3 {
		t.Errorf("failures %v", st.rep.Failures)
	}

	// nsys missing: every nsys run fails before launching, the stage goes on.
	o2 := testOptions(t)
	o2.NsysBin = filepath.Join(dir, "no-such-nsys")
	st2 := newTestStage(t, &o2, &log)
	if err := st2.run(context.Background(), []string{ToolNsys, ToolTorch}, specs[3:]); err != nil {
		t.Fatal(err)
	}
	runs = runByKey(st2.manifest)
	if r := runs["nsys/trtllm"]; r.ProfileError == nil || !strings.HasPrefix(*r.ProfileError, "nsys not available") || len(r.Cmd) != 0 {
		t.Errorf("nsys missing: %+v", r)
	}
	if r := runs["torch/trtllm"]; r.ProfileError != nil {
		t.Errorf("torch after a failed nsys run: %s", *r.ProfileError)
	}
}

func TestStageInterrupted(t *testing.T) {
	o := testOptions(t)
	st := newTestStage(t, &o, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := st.run(ctx, []string{ToolTorch}, []backend.Spec{fakeSpec(t, "vllm", filepath.Join(t.TempDir(), "c"), nil)}); err != nil {
		t.Fatal(err)
	}
	m, err := results.LoadProfileManifest(st.rep.ManifestPath)
	if err != nil || len(m.Runs) != 0 || m.Meta["interrupted"] != true || !st.rep.Interrupted {
		t.Errorf("manifest %+v, %v", m, err)
	}
}
