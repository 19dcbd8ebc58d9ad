package results

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

func fp(v float64) *float64 { return &v }

func stats(p50, p90, p99 float64) Stats {
	return Stats{Mean: fp(p50), P50: fp(p50), P90: fp(p90), P99: fp(p99), Max: fp(p99), N: 10}
}

func sampleOnline() *Online {
	return &Online{
		Meta: map[string]any{
			"model": "gpt2", "device": "cpu", "n": 100.0, "scales": []any{0.4, 1.6},
			"temperature": 0.7, "top_p": 0.9, "top_k": 50.0, "wall_s": 12.5,
			"run_start_time": "2026-01-02T03:04:05+00:00", "run_end_time": "2026-01-02T03:04:17+00:00",
			"versions": map[string]any{"go": "go1.26.8", "git_rev": "abc1234", "roseinfer": "dev", "gpu": ""},
		},
		Summaries: []Summary{
			// Out of order on purpose: rows sort by scale, then label.
			{Backend: "roseinfer+nocache", Scale: 1.6, NumRequests: 10, NumSuccess: 10, ReqPerS: 1.25, TokPerS: 80,
				TTFTMs: stats(10, 20, 30), TPOTMs: stats(1, 2, 3), ITLMs: stats(1, 2, 4), E2EMs: stats(100, 200, 300),
				SendLagMs: Stats{P99: fp(0.12)}, Valid: true},
			{Backend: "roseinfer", Scale: 1.6, NumRequests: 10, NumSuccess: 8, NumError: 2, ErrorsByKind: map[string]int{"connect": 1, "timeout": 1},
				ReqPerS: 1, TokPerS: 64, TTFTMs: stats(11, 21, 31), TPOTMs: stats(1.5, 2.5, 3.5), ITLMs: stats(1, 2, 3), E2EMs: stats(101, 201, 301),
				SendLagMs: Stats{P99: fp(0.2)}, Valid: true},
			// No successful request: every statistic is null.
			{Backend: "roseinfer", Scale: 0.4, NumRequests: 10, NumSuccess: 0, NumError: 10, ErrorsByKind: map[string]int{"http_5xx": 10},
				SendLagMs: Stats{P99: fp(7.5)}, Valid: false, InvalidReason: "send lag p99 7.50 ms > 5 ms"},
			{Backend: "my|server", Scale: 0.4, NumRequests: 10, NumSuccess: 10, ReqPerS: 2, TokPerS: 100,
				TTFTMs: stats(5, 6, 7), TPOTMs: stats(1, 1, 1), ITLMs: stats(1, 1, 1), E2EMs: stats(50, 60, 70),
				SendLagMs: Stats{P99: fp(0.05)}, Valid: true},
		},
	}
}

func sampleOffline() *Offline {
	return &Offline{
		Meta: map[string]any{"model": "gpt2", "device": "cpu", "num_prompts": 4.0, "input_len": 256.0, "output_len": 16.0,
			"temperature": 0.7, "top_p": 0.9, "top_k": 50.0, "wall_s": 3.25},
		Results: []OfflineResult{
			{Backend: "roseinfer+server", RequestThroughputRPS: 2, OutputThroughputTPS: 32, TotalThroughputTPS: 544, TotalS: 2},
			{Backend: "roseinfer", RequestThroughputRPS: 4, OutputThroughputTPS: 64, TotalThroughputTPS: 1088, TotalS: 1,
				PrefillS: fp(0.25), DecodeS: fp(0.75)},
			{Backend: "vllm", Extra: map[string]any{"error": "CUDA out of memory\ntraceback..."}},
		},
	}
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden:\n--- got ---\n%s\n--- want ---\n%s", name, got, want)
	}
}

func TestWriteOnlineSummaryGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteOnlineSummary(&buf, sampleOnline()); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "online_summary.golden.md", buf.Bytes())
	out := buf.String()
	// The original's header and order, independent of the golden file.
	if !strings.Contains(out, "| scale | backend") || !strings.Contains(out, "TTFT p50/p90/p99 (ms)") {
		t.Errorf("missing the original's header:\n%s", out)
	}
	if strings.Index(out, "my\\|server") > strings.Index(out, " 1.60 |") {
		t.Errorf("rows not sorted by scale")
	}
	if !strings.Contains(out, "INVALID: send lag p99 7.50 ms > 5 ms") {
		t.Errorf("invalid scale not marked")
	}
}

func TestWriteOfflineSummaryGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteOfflineSummary(&buf, sampleOffline()); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "offline_summary.golden.md", buf.Bytes())
}

func TestMergeOnline(t *testing.T) {
	a := sampleOnline()
	a.ByBackend = map[string]*Backend{"roseinfer": {Backend: "roseinfer", BaseURL: "a"}}
	b := &Online{
		Meta: map[string]any{"model": "other"},
		Summaries: []Summary{
			{Backend: "roseinfer", Scale: 1.6, NumRequests: 99}, // overrides a's
			{Backend: "vllm", Scale: 0.8, NumRequests: 5},
		},
		ByBackend: map[string]*Backend{"roseinfer": {Backend: "roseinfer", BaseURL: "b"}, "vllm": {Backend: "vllm"}},
	}
	m := MergeOnline([]*Online{a, b}, []string{"/a.json", "/b.json"})
	var keys []string
	for _, s := range m.Summaries {
		keys = append(keys, s.Backend+"@"+strconv.FormatFloat(s.Scale, 'f', -1, 64))
	}
	want := "my|server@0.4 roseinfer@0.4 vllm@0.8 roseinfer@1.6 roseinfer+nocache@1.6"
	if strings.Join(keys, " ") != want {
		t.Errorf("summaries %v, want %s", keys, want)
	}
	for _, s := range m.Summaries {
		if s.Backend == "roseinfer" && s.Scale == 1.6 && s.NumRequests != 99 {
			t.Errorf("later file did not override (backend, scale)")
		}
	}
	if m.ByBackend["roseinfer"].BaseURL != "b" || m.ByBackend["vllm"] == nil {
		t.Errorf("by_backend not merged by label: %+v", m.ByBackend)
	}
	if m.Meta["model"] != "gpt2" {
		t.Errorf("meta must come from the first file")
	}
	if got := strings.Join(m.Meta["backends"].([]string), ","); got != "my|server,roseinfer,roseinfer+nocache,vllm" {
		t.Errorf("meta.backends %s", got)
	}
	if got := m.Meta["merged_from"].([]string); len(got) != 2 || got[1] != "/b.json" {
		t.Errorf("meta.merged_from %v", got)
	}
}

func TestMergeFilesOffline(t *testing.T) {
	dir := t.TempDir()
	first := sampleOffline()
	second := &Offline{Meta: map[string]any{"model": "x"}, Results: []OfflineResult{{Backend: "roseinfer", TotalS: 9}}}
	p1, p2 := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	if err := WriteJSON(p1, first); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(p2, second); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "m.json")
	if err := MergeFiles(KindOffline, out, []string{p1, p2}); err != nil {
		t.Fatal(err)
	}
	m, err := LoadOffline(out)
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, r := range m.Results {
		labels = append(labels, r.Backend)
		if r.Backend == "roseinfer" && r.TotalS != 9 {
			t.Errorf("later file did not override roseinfer")
		}
	}
	if strings.Join(labels, ",") != "roseinfer,roseinfer+server,vllm" {
		t.Errorf("results %v, want sorted labels", labels)
	}
	if err := MergeFiles("bogus", out, []string{p1}); err == nil {
		t.Error("unknown kind accepted")
	}
	if err := MergeFiles(KindOnline, out, []string{p1}); err == nil {
		t.Error("an offline file merged as online")
	}
}
