package offline

import (
	"context"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/results"
)

// vLLM without an environment: a zeroed row saying why and how to fix it;
// roseinfer still runs.
func TestOfflineSkipsBackendWithoutEnv(t *testing.T) {
	for _, k := range []string{"ROSELLM_VLLM_PYTHON", "VLLM_PYTHON"} {
		t.Setenv(k, "")
	}
	o := Default()
	o.Backends = []string{"vllm", LabelInProcess}
	o.Device, o.SimStep = "sim", 0
	o.NumPrompts, o.InputLen, o.OutputLen, o.WarmupPrompts = 2, 8, 3, 0
	o.EnvsRoot, o.RunDir = t.TempDir(), t.TempDir()
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Failures) != 1 || !strings.HasPrefix(rep.Failures[0], "vllm: skipped") {
		t.Errorf("failures %v", rep.Failures)
	}
	off, err := results.LoadOffline(rep.ResultsPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(off.Results) != 2 {
		t.Fatalf("%d results", len(off.Results))
	}
	v := off.Results[0]
	msg, _ := v.Extra["error"].(string)
	if v.Backend != "vllm" || v.Extra["skipped"] != true || !strings.Contains(msg, "fix: bench envs setup vllm") ||
		v.Extra["fix_hint"] != "bench envs setup vllm" || v.OutputThroughputTPS != 0 || v.Device != "cuda" {
		t.Errorf("vllm row %+v", v)
	}
	if r := off.Results[1]; r.TotalOutputTokens != 6 || r.Extra["error"] != nil {
		t.Errorf("roseinfer row %+v", r)
	}
}
