package main

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/roseinfer/roseinfer/harness/backend/backendtest"
	"github.com/roseinfer/roseinfer/harness/workload/workloadtest"
	"github.com/roseinfer/roseinfer/results"
)

// `bench online` and `bench offline` run a qwen3-tiny checkpoint end to end
// on the CPU through the real roseinfer server on loopback: every request
// ok, every prompt within Qwen3's regular tokens (the server would count a
// different prompt length otherwise), the clamp from its config.json.
func TestQwen3EndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("serves a Qwen3 model on the CPU")
	}
	bin := buildRoseinfer(t)
	dir := t.TempDir()
	if err := workloadtest.Qwen3Tiny(dir); err != nil {
		t.Fatal(err)
	}
	sig = interrupts{stop: context.Background(), abort: context.Background()}
	port := strconv.Itoa(backendtest.PortBase(t))

	t.Run("online", func(t *testing.T) {
		outDir := t.TempDir()
		out, code := execBench(t, "online", "--device", "cpu", "--model", dir, "--n", "8", "--scales", "1",
			"--max-output-len", "4", "--warmup-requests", "1", "--warmup-input-len", "16", "--warmup-output-len", "2",
			"--roseinfer-bin", bin, "--port-base", port, "--server-cpus", "none", "--client-cpus", "none",
			"--output-dir", outDir)
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		paths, _ := filepath.Glob(filepath.Join(outDir, "online_*", results.OnlineResultsFile))
		if len(paths) != 1 {
			t.Fatalf("results files %v", paths)
		}
		on, err := results.LoadOnline(paths[0])
		if err != nil {
			t.Fatal(err)
		}
		if got := on.Meta["model_max_len"]; got != float64(2048) {
			t.Errorf("model_max_len %v, want qwen3-tiny's 2048", got)
		}
		b := on.ByBackend["roseinfer"]
		if b == nil || len(b.Runs) != 1 {
			t.Fatalf("backend results %+v", b)
		}
		reqs := b.Runs[0].RequestMetrics
		if len(reqs) != 8 {
			t.Fatalf("%d requests, want 8", len(reqs))
		}
		for _, r := range reqs {
			if r.Error != nil || r.NumOutputTokens < 1 {
				t.Errorf("request %d: error %v, %d tokens", r.Index, r.Error, r.NumOutputTokens)
			}
			if r.UsagePromptTokens != nil && *r.UsagePromptTokens != r.InputLen {
				t.Errorf("request %d: server counted %d prompt tokens, sent %d", r.Index, *r.UsagePromptTokens, r.InputLen)
			}
		}
	})

	t.Run("offline", func(t *testing.T) {
		outDir := t.TempDir()
		out, code := execBench(t, "offline", "--device", "cpu", "--model", dir, "--num-prompts", "4",
			"--input-len", "16", "--output-len", "4", "--warmup-prompts", "1", "--roseinfer-bin", bin,
			"--port-base", port, "--output-dir", outDir)
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		paths, _ := filepath.Glob(filepath.Join(outDir, "offline_*", results.OfflineResultsFile))
		if len(paths) != 1 {
			t.Fatalf("results files %v", paths)
		}
		off, err := results.LoadOffline(paths[0])
		if err != nil {
			t.Fatal(err)
		}
		if len(off.Results) != 2 {
			t.Fatalf("%d results, want roseinfer and roseinfer+server", len(off.Results))
		}
		for _, r := range off.Results {
			if r.Extra["error"] != nil || r.TotalInputTokens != 64 || r.TotalOutputTokens != 16 {
				t.Errorf("%s: error %v, totals %d in %d out; want 64 and 16", r.Backend, r.Extra["error"], r.TotalInputTokens, r.TotalOutputTokens)
			}
		}
	})
}
