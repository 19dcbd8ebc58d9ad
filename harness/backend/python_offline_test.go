package backend

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/roseinfer/roseinfer/results"
)

func needPython3(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: the offline drivers are not run here")
	}
}

// offlineFixture is 3 prompts of 4 tokens generating 5 tokens each.
func offlineFixture(runDir string) OfflineSettings {
	return OfflineSettings{
		Prompts:   [][]int32{{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}},
		OutputLen: 5, Temperature: 0.7, TopP: 0.9, TopK: 50, IgnoreEOS: true, Seed: 42,
		MaxBatchSize: 256, WarmupPrompts: 8, RunDir: runDir,
	}
}

// The real drivers, run by the environments' (fake) interpreters against
// fake libraries: exact token totals, throughputs from harness/metrics, the
// command, environment, interpreter and versions recorded.
func TestRunOfflineDrivers(t *testing.T) {
	needPython3(t)
	root := t.TempDir()
	fakeVenv(t, root, "vllm", probeVLLM)
	fakeVenv(t, root, "sglang", probeSGLang)
	fakeVenv(t, root, "trtllm", probeTRTLLM)
	for _, name := range []string{NameVLLM, NameSGLang, NameTRTLLM} {
		t.Run(name, func(t *testing.T) {
			o := DefaultThirdParty()
			runDir := t.TempDir()
			res := RunOffline(context.Background(), name, &o, testRun(root, nil), offlineFixture(runDir))
			if e, _ := res.Extra["error"].(string); e != "" {
				t.Fatalf("error: %s", e)
			}
			if res.Backend != name || res.NumPrompts != 3 || res.InputLen != 4 || res.TotalInputTokens != 12 || res.TotalOutputTokens != 15 {
				t.Errorf("result %+v", res)
			}
			if !(res.TotalS >= 0) || res.RequestThroughputRPS != 3/max(res.TotalS, 1e-9) || res.OutputThroughputTPS != 15/max(res.TotalS, 1e-9) {
				t.Errorf("throughputs %+v", res)
			}
			python, _ := res.Extra["python"].(string)
			cmd, _ := res.Extra["cmd"].([]string)
			if !strings.HasSuffix(python, "/.venvs/"+name+"/bin/python") || len(cmd) != 6 || cmd[0] != python ||
				!strings.HasSuffix(cmd[1], "/drivers/"+name+"_offline.py") {
				t.Errorf("python %q cmd %v", python, cmd)
			}
			if v, _ := res.Extra["library_version"].(string); !strings.HasSuffix(v, "+fake") {
				t.Errorf("library_version %v", res.Extra["library_version"])
			}
			var job OfflineJob
			data, err := os.ReadFile(cmd[3])
			if err != nil || json.Unmarshal(data, &job) != nil || job.PromptTokenIDs[2][3] != 12 || *job.Dtype != "float16" {
				t.Errorf("job file %s: %v %s", cmd[3], err, data)
			}
			if log, _ := res.Extra["log_path"].(string); log == "" {
				t.Error("no log path")
			}
		})
	}
}

func TestRunOfflineVLLMExtras(t *testing.T) {
	needPython3(t)
	root := t.TempDir()
	fakeVenv(t, root, "vllm", probeVLLM)
	t.Setenv("FAKE_VLLM_NO_ATTENTION_BACKEND", "1")
	o := DefaultThirdParty()
	res := RunOffline(context.Background(), NameVLLM, &o, testRun(root, nil), offlineFixture(t.TempDir()))
	if res.Extra["error"] != nil || res.Extra["attention_backend_supported"] != false ||
		res.Extra["async_scheduling_supported"] != true || res.Extra["max_num_seqs"] != float64(128) {
		t.Errorf("extra %v", res.Extra)
	}
}

// Failures are results, not crashes: out of memory, an import error, a
// driver past its timeout, and a backend with no environment.
func TestRunOfflineFailures(t *testing.T) {
	needPython3(t)
	root := t.TempDir()
	fakeVenv(t, root, "vllm", probeVLLM)
	fakeVenv(t, root, "trtllm", probeTRTLLM)
	cases := []struct {
		name, backend, env, kind, text string
		timeout                        time.Duration
	}{
		{"out of memory", NameVLLM, "FAKE_OOM", "oom", "CUDA out of memory", 0},
		{"import error", NameTRTLLM, "FAKE_IMPORT_ERROR", "import", "libmpi.so.40", 0},
		{"timeout", NameVLLM, "FAKE_SLEEP_S", "timeout", "timed out", 500 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			value := "1"
			if c.env == "FAKE_SLEEP_S" {
				value = "30"
			}
			t.Setenv(c.env, value)
			o := DefaultThirdParty()
			s := offlineFixture(t.TempDir())
			s.Timeout = c.timeout
			res := RunOffline(context.Background(), c.backend, &o, testRun(root, nil), s)
			msg, _ := res.Extra["error"].(string)
			if res.Extra["error_kind"] != c.kind || !strings.Contains(msg, c.text) {
				t.Errorf("kind %v error %q", res.Extra["error_kind"], msg)
			}
			if c.kind == "oom" && !strings.Contains(strings.ToLower(msg), "out of memory") {
				t.Errorf("an OOM must say so (plots tag it): %q", msg)
			}
			if res.OutputThroughputTPS != 0 || res.TotalOutputTokens != 0 || res.TotalS <= 0 || res.Extra["exit_code"] == nil {
				t.Errorf("failed run not zeroed: %+v", res)
			}
			if res.TotalInputTokens != 12 || res.NumPrompts != 3 {
				t.Errorf("workload not recorded: %+v", res)
			}
		})
	}
}

func TestRunOfflineSkipped(t *testing.T) {
	o := DefaultThirdParty()
	res := RunOffline(context.Background(), NameSGLang, &o, testRun(t.TempDir(), nil), offlineFixture(t.TempDir()))
	if res.Extra["skipped"] != true || res.Extra["fix_hint"] != "bench envs setup sglang" ||
		!strings.Contains(res.Extra["error"].(string), "no SGLang environment") || res.Backend != "sglang" {
		t.Errorf("extra %v", res.Extra)
	}
	var _ results.OfflineResult = res
	o.TRTLLMBackend = "_autodeploy"
	if res := RunOffline(context.Background(), NameTRTLLM, &o, testRun(t.TempDir(), nil), offlineFixture(t.TempDir())); !strings.Contains(res.Extra["error"].(string), "_autodeploy") {
		t.Errorf("_autodeploy offline: %v", res.Extra)
	}
}
