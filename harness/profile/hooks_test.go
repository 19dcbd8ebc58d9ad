package profile

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/roseinfer/roseinfer/harness/backend"
	"github.com/roseinfer/roseinfer/results"
)

// The expected values in this file are transcribed from the original
// Python harness's profile stage (its per-backend profiler environment,
// launch flags and nsys wrapper), not generated from this package.

// testOptions are the defaults with the stage's pauses removed.
func testOptions(t *testing.T) Options {
	o := DefaultOptions()
	o.Profile = "both"
	o.waits = waits{HTTPTimeout: 10 * time.Second, NsysExit: 10 * time.Second, NsysExitTRT: 10 * time.Second,
		ServerStop: 5 * time.Second, ReportWait: 3 * time.Second, TraceFileWait: 200 * time.Millisecond}
	return o
}

// fakeNsys writes an executable named nsys and returns its path.
func fakeNsys(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nsys")
	if err := os.WriteFile(path, []byte(fakeNsysScript), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// fakeNsysScript stands in for `nsys profile`: it runs the command after
// "-o PREFIX" as its child, forwards SIGTERM to it, and when the child is
// gone writes PREFIX.nsys-rep (unless FAKE_NSYS_NO_REPORT is set), as nsys
// writes its report once its target exits.
const fakeNsysScript = `#!/bin/sh
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    -o) out="$2"; shift 2; break ;;
    *) shift ;;
  esac
done
"$@" &
child=$!
trap 'kill -TERM $child 2>/dev/null' TERM INT
wait $child
wait $child
if [ -z "$FAKE_NSYS_NO_REPORT" ]; then echo report > "$out.nsys-rep"; fi
`

func TestServerArgvAndEnvGolden(t *testing.T) {
	nsys := fakeNsys(t)
	server := []string{"python", "-m", "server", "--port", "18000"}
	taskset := []string{"taskset", "-c", "0-3"}
	// roseinfer's captures are confined to their directory (--profile-dir).
	profileDir := func(tool, label string) []string {
		return []string{"--profile-dir", "/runs/online_x/profiles/" + tool + "/" + label}
	}
	nsysArgs := func(label string) []string {
		return []string{nsys, "profile", "--force-overwrite=true", "--capture-range=none", "--trace=cuda,nvtx,osrt",
			"--cuda-graph-trace=node", "--sample=none", "--trace-fork-before-exec=true", "-o",
			"/runs/online_x/profiles/nsys/" + label + "/" + label}
	}
	cat := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	abs := func(tool, label string) string {
		return "/runs/online_x/profiles/" + tool + "/" + label
	}
	cases := []struct {
		tool, label string
		opts        func(o *Options)
		wantArgv    []string
		wantEnv     map[string]string
	}{
		{ToolTorch, "roseinfer", nil, cat(taskset, server, profileDir("torch", "roseinfer")), map[string]string{
			"ROSEINFER_NVTX": "1", "ROSEINFER_TORCH_PROFILE_WITH_STACK": "0", "ROSEINFER_TORCH_PROFILE_RECORD_SHAPES": "0",
			"ROSEINFER_TORCH_PROFILE_WITH_PROFILE_MEMORY": "0", "ROSEINFER_TORCH_PROFILE_DELAY_STEPS": "0",
			"ROSEINFER_TORCH_PROFILE_NUM_STEPS": "20"}},
		{ToolTorch, "roseinfer+nocache", func(o *Options) { o.TorchMinimal = false; o.TorchWithStack = true },
			cat(taskset, server, profileDir("torch", "roseinfer+nocache")),
			map[string]string{"ROSEINFER_NVTX": "1", "ROSEINFER_TORCH_PROFILE_WITH_STACK": "1",
				"ROSEINFER_TORCH_PROFILE_RECORD_SHAPES": "0", "ROSEINFER_TORCH_PROFILE_WITH_PROFILE_MEMORY": "0"}},
		{ToolPprof, "roseinfer", nil, cat(taskset, server, profileDir("pprof", "roseinfer")), map[string]string{"ROSEINFER_NVTX": "1"}},
		{ToolNsys, "roseinfer", nil, cat(nsysArgs("roseinfer"), taskset, server, profileDir("nsys", "roseinfer")), map[string]string{"ROSEINFER_NVTX": "1"}},
		{ToolTorch, "vllm", func(o *Options) { o.TorchDelaySteps, o.TorchNumSteps, o.TorchRecordShape = 3, 7, true }, cat(taskset, server),
			map[string]string{"ROSEINFER_NVTX": "1", "VLLM_TORCH_PROFILER_DIR": abs("torch", "vllm"),
				"VLLM_TORCH_PROFILER_WITH_STACK": "0", "VLLM_TORCH_PROFILER_RECORD_SHAPES": "1",
				"VLLM_TORCH_PROFILER_WITH_PROFILE_MEMORY": "0", "VLLM_TORCH_PROFILER_DISABLE_ASYNC_LLM": "1",
				"VLLM_PROFILER_DELAY_ITERS": "3", "VLLM_PROFILER_MAX_ITERS": "7"}},
		{ToolTorch, "vllm", func(o *Options) { o.TorchMinimal, o.TorchWithMemory = false, true }, cat(taskset, server),
			map[string]string{"ROSEINFER_NVTX": "1", "VLLM_TORCH_PROFILER_DIR": abs("torch", "vllm"),
				"VLLM_TORCH_PROFILER_WITH_STACK": "0", "VLLM_TORCH_PROFILER_RECORD_SHAPES": "0",
				"VLLM_TORCH_PROFILER_WITH_PROFILE_MEMORY": "1"}},
		{ToolNsys, "vllm", nil, cat(nsysArgs("vllm"), taskset, server, []string{"--enable-layerwise-nvtx-tracing"}),
			map[string]string{"ROSEINFER_NVTX": "1"}},
		{ToolNsys, "vllm", func(o *Options) {
			o.VLLMNVTXScopes = false
			o.NsysTrace, o.NsysKill, o.NsysCUDAFlushIntervalMs, o.NsysCPUCtxSw = "cuda,nvtx", "sigkill", 50, "none"
		}, cat([]string{nsys, "profile", "--force-overwrite=true", "--capture-range=none", "--trace=cuda,nvtx",
			"--cuda-graph-trace=node", "--kill=sigkill", "--cuda-flush-interval=50", "--cpuctxsw=none", "--sample=none",
			"--trace-fork-before-exec=true", "-o", "/runs/online_x/profiles/nsys/vllm/vllm"}, taskset, server),
			map[string]string{"ROSEINFER_NVTX": "1"}},
		{ToolTorch, "sglang", nil, cat(taskset, server), map[string]string{"ROSEINFER_NVTX": "1"}},
		{ToolNsys, "sglang", nil, cat(nsysArgs("sglang"), taskset, server, []string{"--enable-layerwise-nvtx-marker"}),
			map[string]string{"ROSEINFER_NVTX": "1"}},
		{ToolNsys, "sglang", func(o *Options) { o.SGLangLayerwiseNVTX = false }, cat(nsysArgs("sglang"), taskset, server),
			map[string]string{"ROSEINFER_NVTX": "1"}},
		{ToolTorch, "trtllm", nil, cat(taskset, server), map[string]string{"ROSEINFER_NVTX": "1",
			"TLLM_LLMAPI_ENABLE_NVTX": "1", "TLLM_PROFILE_START_STOP": "1-20", "TLLM_PROFILE_RECORD_GC": "1",
			"TLLM_TORCH_PROFILE_TRACE": abs("torch", "trtllm") + "/trace.json"}},
		{ToolNsys, "trtllm", func(o *Options) { o.TRTLLMProfileRecordGC, o.TRTLLMProfileStartStop = false, "5-9" },
			cat(nsysArgs("trtllm"), taskset, server), map[string]string{"ROSEINFER_NVTX": "1",
				"TLLM_LLMAPI_ENABLE_NVTX": "1", "TLLM_PROFILE_START_STOP": "5-9"}},
		{ToolNsys, "llama", nil, cat(nsysArgs("llama"), taskset, server), map[string]string{"ROSEINFER_NVTX": "1"}},
	}
	for _, tc := range cases {
		o := testOptions(t)
		o.NsysBin = nsys
		if tc.opts != nil {
			tc.opts(&o)
		}
		st := &stage{opts: &o, nsysWrap: nsysArgv, launch: backend.LaunchOptions{Prefix: taskset}}
		spec := backend.Spec{Label: tc.label, Command: func(string, int) []string { return server },
			Env: map[string]string{"CUDA_VISIBLE_DEVICES": "0"}}
		base := BaseBackend(tc.label)
		run := &results.ProfileRun{OutputDir: "/runs/online_x/profiles/" + tc.tool + "/" + tc.label}
		c := &capture{tool: tc.tool, label: tc.label, base: base, outDir: abs(tc.tool, tc.label), opts: &o}
		ps, launch, err := st.profiledSpec(spec, c, hookFor(base), run)
		if err != nil {
			t.Fatalf("%s/%s: %v", tc.tool, tc.label, err)
		}
		argv := append(append([]string{}, launch.Prefix...), ps.Command("127.0.0.1", 18000)...)
		if !reflect.DeepEqual(argv, tc.wantArgv) {
			t.Errorf("%s/%s argv:\n got %q\nwant %q", tc.tool, tc.label, argv, tc.wantArgv)
		}
		if !reflect.DeepEqual(run.Env, tc.wantEnv) {
			t.Errorf("%s/%s env:\n got %v\nwant %v", tc.tool, tc.label, run.Env, tc.wantEnv)
		}
		if ps.Env["CUDA_VISIBLE_DEVICES"] != "0" {
			t.Errorf("%s/%s: the benchmark's env was dropped: %v", tc.tool, tc.label, ps.Env)
		}
		if ps.Label != tc.label+".profile_"+tc.tool {
			t.Errorf("%s/%s: log label %q", tc.tool, tc.label, ps.Label)
		}
		wantPrefix := tc.tool == ToolNsys
		if (run.NsysOutputPrefix != nil) != wantPrefix {
			t.Errorf("%s/%s: nsys_output_prefix %v", tc.tool, tc.label, run.NsysOutputPrefix)
		}
	}
}

func TestOfflineNsysArgvGolden(t *testing.T) {
	o := DefaultOptions()
	o.NsysBin = "nsys"
	got := nsysOfflineArgv(&o, "/r/profiles/nsys/roseinfer/roseinfer")
	want := []string{"nsys", "profile", "--force-overwrite=true", "--capture-range=none", "--trace=cuda,nvtx,osrt",
		"--sample=none", "--trace-fork-before-exec=true", "-o", "/r/profiles/nsys/roseinfer/roseinfer"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	o.NsysCUDAFlushIntervalMs = 100
	got = nsysOfflineArgv(&o, "p")
	if got[5] != "--cuda-flush-interval=100" {
		t.Errorf("flush interval: %q", got)
	}
}

// recordedCall is one HTTP request a fake server received.
type recordedCall struct {
	Method, Path string
	Body         string
	ContentType  string
}

// recorder is an httptest server that records every call and answers
// 200 {"status":"ok"} (or status for the paths in fail).
type recorder struct {
	mu    sync.Mutex
	calls []recordedCall
	fail  map[string]int
	srv   *httptest.Server
}

func newRecorder(t *testing.T) *recorder {
	r := &recorder{fail: map[string]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.calls = append(r.calls, recordedCall{req.Method, req.URL.Path, string(body), req.Header.Get("Content-Type")})
		status := r.fail[req.URL.Path]
		r.mu.Unlock()
		if status != 0 {
			w.WriteHeader(status)
			w.Write([]byte(`{"detail":"no profiler"}`))
			return
		}
		w.Write([]byte(`{"status":"ok"}`))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func TestHookHTTPCallsGolden(t *testing.T) {
	outDir := "/runs/x/profiles/torch/LABEL"
	type call struct{ path, body string } // body "" = none; else JSON compared as values
	cases := []struct {
		name, tool, label string
		opts              func(o *Options)
		begin, end        []call
	}{
		{"roseinfer torch", ToolTorch, "roseinfer", nil,
			[]call{{"/start_profile", `{"tool":"torch","output_dir":"/runs/x/profiles/torch/LABEL"}`}},
			[]call{{"/stop_profile", ""}}},
		{"roseinfer pprof", ToolPprof, "roseinfer+nocache", nil,
			[]call{{"/start_profile", `{"tool":"pprof","output_dir":"/runs/x/profiles/torch/LABEL"}`}},
			[]call{{"/stop_profile", ""}}},
		{"roseinfer nsys", ToolNsys, "roseinfer", nil, nil, nil},
		{"vllm torch", ToolTorch, "vllm", nil, []call{{"/start_profile", ""}}, []call{{"/stop_profile", ""}}},
		{"vllm nsys", ToolNsys, "vllm", nil, nil, nil},
		{"sglang torch minimal", ToolTorch, "sglang", func(o *Options) { o.TorchDelaySteps = 2 },
			[]call{{"/start_profile", `{"output_dir":"/runs/x/profiles/torch/LABEL","activities":["CPU","GPU"],` +
				`"with_stack":false,"record_shapes":false,"start_step":2,"num_steps":20,"profile_prefix":"sglang"}`}},
			nil}, // num_steps > 0: SGLang stops by itself
		{"sglang torch minimal no delay", ToolTorch, "sglang", func(o *Options) { o.TorchNumSteps = 0; o.TorchWithMemory = true },
			[]call{{"/start_profile", `{"output_dir":"/runs/x/profiles/torch/LABEL","activities":["CPU","GPU","MEM"],` +
				`"with_stack":false,"record_shapes":false,"profile_prefix":"sglang"}`}},
			[]call{{"/stop_profile", ""}}},
		{"sglang torch full", ToolTorch, "sglang", func(o *Options) { o.TorchMinimal, o.TorchWithStack, o.TorchRecordShape = false, true, true },
			[]call{{"/start_profile", `{"output_dir":"/runs/x/profiles/torch/LABEL","activities":["CPU","GPU"],` +
				`"with_stack":true,"record_shapes":true}`}},
			[]call{{"/stop_profile", ""}}},
		{"sglang nsys", ToolNsys, "sglang", nil, nil, nil},
		{"trtllm torch", ToolTorch, "trtllm", nil, nil, nil},
		{"trtllm nsys", ToolNsys, "trtllm", nil, nil, nil},
	}
	for _, tc := range cases {
		o := testOptions(t)
		if tc.opts != nil {
			tc.opts(&o)
		}
		rec := newRecorder(t)
		base := BaseBackend(tc.label)
		h := hookFor(base)
		c := &capture{tool: tc.tool, label: tc.label, base: base, outDir: outDir, opts: &o}
		ctl := newController(rec.srv.URL, "", time.Second)
		check := func(phase string, want []call) {
			t.Helper()
			rec.mu.Lock()
			got := rec.calls
			rec.calls = nil
			rec.mu.Unlock()
			if len(got) != len(want) {
				t.Fatalf("%s %s: calls %+v, want %+v", tc.name, phase, got, want)
			}
			for i, w := range want {
				g := got[i]
				if g.Method != http.MethodPost || g.Path != w.path {
					t.Errorf("%s %s: call %d = %s %s, want POST %s", tc.name, phase, i, g.Method, g.Path, w.path)
				}
				if w.body == "" {
					if g.Body != "" || g.ContentType != "" {
						t.Errorf("%s %s: %s has body %q (%s), want none", tc.name, phase, w.path, g.Body, g.ContentType)
					}
					continue
				}
				if g.Body != w.body {
					t.Errorf("%s %s: %s body\n got %s\nwant %s", tc.name, phase, w.path, g.Body, w.body)
				}
				if !json.Valid([]byte(g.Body)) || g.ContentType != "application/json" {
					t.Errorf("%s %s: body not JSON or content type %q", tc.name, phase, g.ContentType)
				}
			}
		}
		if h.begin != nil {
			if err := h.begin(context.Background(), c, ctl); err != nil {
				t.Fatalf("%s begin: %v", tc.name, err)
			}
		}
		check("begin", tc.begin)
		if h.end != nil {
			_, err := h.end(context.Background(), c, ctl)
			if err != nil && tc.name != "trtllm torch" {
				t.Fatalf("%s end: %v", tc.name, err)
			}
		}
		check("end", tc.end)
	}
}

func TestHookHTTPErrors(t *testing.T) {
	o := testOptions(t)
	rec := newRecorder(t)
	rec.fail["/start_profile"] = http.StatusNotFound
	rec.fail["/stop_profile"] = http.StatusBadRequest
	ctl := newController(rec.srv.URL, "", time.Second)
	c := &capture{tool: ToolTorch, label: "vllm", base: "vllm", outDir: "/o", opts: &o}
	err := vllmBegin(context.Background(), c, ctl)
	if err == nil || err.Error() != `start_profile failed: HTTP 404: {"detail":"no profiler"}` {
		t.Errorf("start: %v", err)
	}
	_, err = vllmEnd(context.Background(), c, ctl)
	if err == nil || err.Error() != `stop_profile failed: HTTP 400: {"detail":"no profiler"}` {
		t.Errorf("stop: %v", err)
	}
	rec.srv.Close()
	if err := roseinferBegin(context.Background(), c, ctl); err == nil {
		t.Error("no error from a closed server")
	}
}

func TestTRTLLMTorchTraceWait(t *testing.T) {
	o := testOptions(t)
	dir := t.TempDir()
	c := &capture{tool: ToolTorch, label: "trtllm", base: "trtllm", outDir: dir, opts: &o}
	_, err := trtllmEnd(context.Background(), c, nil)
	want := "torch trace not produced (TensorRT backend); use nsys for GPU profiling"
	if err == nil || err.Error() != want {
		t.Errorf("no trace: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "trace.json"), []byte(`{"traceEvents":[]}`), 0o644)
	if _, err := trtllmEnd(context.Background(), c, nil); err != nil {
		t.Errorf("with trace: %v", err)
	}
}
