package report

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/results"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

func fp(v float64) *float64 { return &v }

func stats(p50, p90, p99 float64) results.Stats {
	return results.Stats{Mean: fp(p50), P50: fp(p50), P90: fp(p90), P99: fp(p99), Max: fp(p99), N: 10}
}

func sampleOnline() *results.Online {
	return &results.Online{
		Meta: map[string]any{
			"model": "gpt2", "device": "cpu", "n": 100.0, "scales": []any{0.4, 1.6},
			"temperature": 0.7, "top_p": 0.9, "top_k": 50.0, "wall_s": 12.5,
			"run_start_time": "2026-01-02T03:04:05+00:00", "run_end_time": "2026-01-02T03:04:17+00:00",
			"versions": map[string]any{"go": "go1.26.8", "git_rev": "abc1234", "roseinfer": "dev", "gpu": ""},
		},
		Summaries: []results.Summary{
			// Out of order on purpose: rows sort by scale, then label.
			{Backend: "roseinfer+nocache", Scale: 1.6, NumRequests: 10, NumSuccess: 10, ReqPerS: 1.25, TokPerS: 80,
				TTFTMs: stats(10, 20, 30), TPOTMs: stats(1, 2, 3), ITLMs: stats(1, 2, 4), E2EMs: stats(100, 200, 300),
				SendLagMs: results.Stats{P99: fp(0.12)}, Valid: true},
			{Backend: "roseinfer", Scale: 1.6, NumRequests: 10, NumSuccess: 8, NumError: 2, ErrorsByKind: map[string]int{"connect": 1, "timeout": 1},
				ReqPerS: 1, TokPerS: 64, TTFTMs: stats(11, 21, 31), TPOTMs: stats(1.5, 2.5, 3.5), ITLMs: stats(1, 2, 3), E2EMs: stats(101, 201, 301),
				SendLagMs: results.Stats{P99: fp(0.2)}, Valid: true},
			// No successful request: every statistic is null.
			{Backend: "roseinfer", Scale: 0.4, NumRequests: 10, NumSuccess: 0, NumError: 10, ErrorsByKind: map[string]int{"http_5xx": 10},
				SendLagMs: results.Stats{P99: fp(7.5)}, Valid: false, InvalidReason: "send lag p99 7.50 ms > 5 ms"},
			{Backend: "my|server", Scale: 0.4, NumRequests: 10, NumSuccess: 10, ReqPerS: 2, TokPerS: 100,
				TTFTMs: stats(5, 6, 7), TPOTMs: stats(1, 1, 1), ITLMs: stats(1, 1, 1), E2EMs: stats(50, 60, 70),
				SendLagMs: results.Stats{P99: fp(0.05)}, Valid: true},
		},
	}
}

func sampleOffline() *results.Offline {
	return &results.Offline{
		Meta: map[string]any{"model": "gpt2", "device": "cpu", "num_prompts": 4.0, "input_len": 256.0, "output_len": 16.0,
			"temperature": 0.7, "top_p": 0.9, "top_k": 50.0, "wall_s": 3.25},
		Results: []results.OfflineResult{
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
