package online

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/results"
)

// A backend with no environment is skipped, with the reason and the fix in
// the results; the run goes on with the others and the exit status says
// something was left out.
func TestOnlineSkipsBackendWithoutEnv(t *testing.T) {
	for _, k := range []string{"ROSELLM_VLLM_PYTHON", "VLLM_PYTHON", "ROSELLM_SGLANG_PYTHON", "SGLANG_PYTHON"} {
		t.Setenv(k, "")
	}
	o := simOptions(t, 500)
	o.Servers.Backends = []string{"vllm", "roseinfer", "sglang", "tgi"}
	o.Servers.EnvsRoot = t.TempDir()
	o.Workload.N, o.Workload.MaxOutputLen, o.Workload.WarmupRequests = 8, 4, 1
	rep, err := Online(context.Background(), context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Failures) != 3 {
		t.Errorf("failures %v, want vllm, sglang and tgi", rep.Failures)
	}
	on, err := results.LoadOnline(rep.ResultsPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"vllm", "sglang"} {
		b := on.ByBackend[name]
		if b == nil || !b.Skipped || !strings.Contains(b.Error, "environment") || b.FixHint != "bench envs setup "+name {
			t.Errorf("by_backend[%s] = %+v", name, b)
		}
	}
	if b := on.ByBackend["tgi"]; b == nil || !b.Skipped || !strings.Contains(b.Error, "not supported") {
		t.Errorf("by_backend[tgi] = %+v", b)
	}
	r := on.ByBackend["roseinfer"]
	if r == nil || r.Skipped || r.Error != "" || len(r.Runs) != 1 || r.Runs[0].Summary.NumSuccess != 8 {
		t.Fatalf("roseinfer did not run on: %+v", r)
	}
	md, err := os.ReadFile(rep.SummaryPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| roseinfer", "- vLLM: skipped: no vLLM environment", "; fix: `bench envs setup vllm`",
		"- SGLang: skipped:", "fix: `bench envs setup sglang`"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("summary lacks %q:\n%s", want, md)
		}
	}
}
