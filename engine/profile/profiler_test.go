package profile

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gprofile "github.com/google/pprof/profile"

	"github.com/roseinfer/roseinfer/engine/profile/phase"
)

// blockInA and blockInB block on a channel for d, so block profiles have a
// named stack to look for.
//
//go:noinline
func blockInA(d time.Duration) { <-time.After(d) }

//go:noinline
func blockInB(d time.Duration) { <-time.After(d) }

// contend makes two goroutines fight over a mutex.
func contend() {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				mu.Lock()
				time.Sleep(10 * time.Microsecond)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

func parseFile(t *testing.T, path string) *gprofile.Profile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := gprofile.Parse(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if err := p.CheckValid(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return p
}

func hasFunction(p *gprofile.Profile, substr string) bool {
	for _, s := range p.Sample {
		for _, loc := range s.Location {
			for _, l := range loc.Line {
				if l.Function != nil && strings.Contains(l.Function.Name, substr) {
					return true
				}
			}
		}
	}
	return false
}

func TestProfilerPprofFiles(t *testing.T) {
	p := New(NewRecorder(0), Options{BlockProfileRateNs: 1, MutexProfileFraction: 1, GoroutineInterval: 10 * time.Millisecond,
		Getenv: func(string) string { return "" }, Info: map[string]string{"device": "test"}})
	capture := func(dir string, block func(time.Duration)) *Result {
		t.Helper()
		if err := p.Start(StartRequest{Tool: ToolPprof, OutputDir: dir}); err != nil {
			t.Fatal(err)
		}
		runSteps(p.Recorder(), 1, 3, phase.Batch{NumSeqs: 1, NumDecodeSeqs: 1})
		block(30 * time.Millisecond)
		contend()
		res, err := p.Stop()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := capture(t.TempDir(), blockInA)
	dir := t.TempDir()
	res := capture(dir, blockInB)
	_ = first

	want := map[string]string{KindPprofCPU: CPUFile, KindPprofGoroutine: GoroutineFile, KindPprofBlock: BlockFile,
		KindPprofMutex: MutexFile, KindChromeTrace: TraceFile}
	got := map[string]string{}
	for _, f := range res.Files {
		got[f.Kind] = f.Path
	}
	for kind, name := range want {
		if got[kind] != filepath.Join(dir, name) {
			t.Errorf("%s file = %q, want %q", kind, got[kind], filepath.Join(dir, name))
		}
	}
	parseFile(t, got[KindPprofCPU])
	gor := parseFile(t, got[KindPprofGoroutine])
	if len(gor.Sample) == 0 || len(gor.Comments) == 0 {
		t.Errorf("goroutine profile: %d samples, comments %v", len(gor.Sample), gor.Comments)
	}
	block := parseFile(t, got[KindPprofBlock])
	if !hasFunction(block, "blockInB") {
		t.Error("block profile lacks blockInB, which blocked during the capture")
	}
	if hasFunction(block, "blockInA") {
		t.Error("block profile has blockInA, which blocked during the previous capture only")
	}
	parseFile(t, got[KindPprofMutex])
	if res.NumSteps != 3 || res.NumSpans != 12 {
		t.Errorf("steps %d spans %d, want 3 and 12", res.NumSteps, res.NumSpans)
	}
	var tr chromeTrace
	data, err := os.ReadFile(got[KindChromeTrace])
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &tr); err != nil {
		t.Fatal(err)
	}
	if tr.OtherData["tool"] != ToolPprof || tr.OtherData["device"] != "test" {
		t.Errorf("otherData %v", tr.OtherData)
	}
}

func TestProfilerTorchWritesTraceOnly(t *testing.T) {
	env := map[string]string{EnvDelaySteps: "1", EnvNumSteps: "2"}
	p := New(NewRecorder(0), Options{Getenv: func(k string) string { return env[k] }})
	dir := t.TempDir()
	if err := p.Start(StartRequest{Tool: ToolTorch, OutputDir: dir}); err != nil {
		t.Fatal(err)
	}
	runSteps(p.Recorder(), 1, 5, phase.Batch{NumSeqs: 1, NumDecodeSeqs: 1})
	res, err := p.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Files) != 1 || res.Files[0].Kind != KindChromeTrace || res.NumSteps != 2 {
		t.Errorf("result %+v, want one trace of 2 steps (window from the environment)", res)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("%d files in the output dir, want trace.json only", len(entries))
	}
}

func TestProfilerErrors(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "file")
	os.WriteFile(notDir, nil, 0o644)
	cases := []struct {
		name string
		req  StartRequest
		env  string
		want string
	}{
		{"no output dir", StartRequest{Tool: ToolTorch}, "", "output_dir is required"},
		{"unknown tool", StartRequest{Tool: "perf", OutputDir: dir}, "", "unknown tool"},
		{"cuda tool", StartRequest{Tool: "cuda", OutputDir: dir}, "", "nsys"},
		{"dir is a file", StartRequest{Tool: ToolTorch, OutputDir: filepath.Join(notDir, "x")}, "", "output_dir"},
		{"bad env", StartRequest{Tool: ToolTorch, OutputDir: dir}, "soon", "not an integer"},
		{"negative steps", StartRequest{Tool: ToolTorch, OutputDir: dir, NumSteps: new(-1)}, "", "negative"},
	}
	for _, tc := range cases {
		p := New(NewRecorder(0), Options{Getenv: func(string) string { return tc.env }})
		err := p.Start(tc.req)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tc.name, err, tc.want)
		}
		if p.Recorder().IsActive() {
			t.Errorf("%s: recorder active after a failed start", tc.name)
		}
	}
}

func post(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("response %q: %v", data, err)
	}
	return resp.StatusCode, m
}

func TestHandler(t *testing.T) {
	p := New(NewRecorder(0), Options{Getenv: func(string) string { return "" }})
	srv := httptest.NewServer(p.Handler())
	defer srv.Close()
	dir := t.TempDir()
	startBody := `{"tool":"torch","output_dir":` + string(must(json.Marshal(dir))) + `}`
	steps := []struct {
		path, body string
		wantStatus int
		wantKey    string // in the JSON answer
	}{
		{StopPath, "", 400, "detail"},  // nothing running
		{StartPath, "", 400, "detail"}, // torch needs output_dir
		{StartPath, "{not json", 400, "detail"},
		{StartPath, startBody, 200, "status"},
		{StartPath, startBody, 400, "detail"}, // already running
		{StopPath, "", 200, "files"},
		{StopPath, "", 400, "detail"},
	}
	for i, st := range steps {
		code, m := post(t, srv.URL+st.path, st.body)
		if code != st.wantStatus || m[st.wantKey] == nil {
			t.Errorf("step %d %s %q: %d %v, want %d with %q", i, st.path, st.body, code, m, st.wantStatus, st.wantKey)
		}
	}
	resp, err := http.Get(srv.URL + StartPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", resp.StatusCode)
	}
	if _, err := os.Stat(filepath.Join(dir, TraceFile)); err != nil {
		t.Error(err)
	}
}

func TestCloseWritesRunningCapture(t *testing.T) {
	p := New(NewRecorder(0), Options{Getenv: func(string) string { return "" }})
	if err := p.Close(); err != nil {
		t.Fatalf("Close with nothing running: %v", err)
	}
	dir := t.TempDir()
	if err := p.Start(StartRequest{Tool: ToolTorch, OutputDir: dir}); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, TraceFile)); err != nil {
		t.Error(err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestBlockProfileLeavesOutTheSampler(t *testing.T) {
	p := New(NewRecorder(0), Options{BlockProfileRateNs: 1, GoroutineInterval: time.Millisecond, Getenv: func(string) string { return "" }})
	dir := t.TempDir()
	if err := p.Start(StartRequest{Tool: ToolPprof, OutputDir: dir}); err != nil {
		t.Fatal(err)
	}
	blockInA(20 * time.Millisecond) // the sampler blocks on its ticker meanwhile
	if _, err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	block := parseFile(t, filepath.Join(dir, BlockFile))
	if !hasFunction(block, "blockInA") || hasFunction(block, "goroutineSampler") {
		t.Errorf("block profile: blockInA %v, sampler %v", hasFunction(block, "blockInA"), hasFunction(block, "goroutineSampler"))
	}
}
