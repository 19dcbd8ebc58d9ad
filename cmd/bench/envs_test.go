package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// clearPythonEnv hides any interpreter variables of the machine running the
// tests.
func clearPythonEnv(t *testing.T) {
	for _, k := range []string{"ROSELLM_VLLM_PYTHON", "VLLM_PYTHON", "ROSELLM_SGLANG_PYTHON", "SGLANG_PYTHON",
		"ROSELLM_TRTLLM_PYTHON", "TRTLLM_PYTHON"} {
		t.Setenv(k, "")
	}
}

// fakeEnvPython is a venv interpreter answering the probe as a ready
// environment.
func fakeEnvPython(t *testing.T, root, name, version string) {
	t.Helper()
	p := filepath.Join(root, ".venvs", name, "bin", "python")
	os.MkdirAll(filepath.Dir(p), 0o755)
	probe := `{"python_version":"3.10.19","found":true,"version":"` + version + `","torch":"2.9.0","import_ok":true,"cuda":{"available":true,"device_count":1,"devices":["NVIDIA H100"]}}`
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho 'ROSEINFER_PROBE "+probe+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// On a machine with nothing installed: a clear table, exit 0; with
// --require, exit 1.
func TestEnvsCheckNothingInstalled(t *testing.T) {
	clearPythonEnv(t)
	root := t.TempDir()
	out, code := execBench(t, "envs", "check", "--root", root)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, want := range []string{"BACKEND  STATUS", "vllm     not set up", "fix: bench envs setup vllm",
		"fix: bench envs setup sglang", "fix: bench envs setup trtllm"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if out, code := execBench(t, "envs", "check", "--root", root, "--require"); code != exitFailed || !strings.Contains(out, "not ready: [vllm sglang trtllm]") {
		t.Errorf("--require: exit %d\n%s", code, out)
	}
}

func TestEnvsCheckRequireSome(t *testing.T) {
	clearPythonEnv(t)
	root := t.TempDir()
	fakeEnvPython(t, root, "vllm", "0.13.0")
	if out, code := execBench(t, "envs", "check", "--root", root, "--require=vllm"); code != 0 || !strings.Contains(out, "vllm     ok") {
		t.Errorf("vllm ready: exit %d\n%s", code, out)
	}
	if out, code := execBench(t, "envs", "check", "--root", root, "--require=vllm,sglang"); code != exitFailed || !strings.Contains(out, "not ready: [sglang]") {
		t.Errorf("sglang missing: exit %d\n%s", code, out)
	}
	if _, code := execBench(t, "envs", "check", "--root", root, "--require=tgi"); code == 0 {
		t.Error("unknown backend in --require accepted")
	}
}

func TestEnvsSetupDryRunRunsNothing(t *testing.T) {
	root := t.TempDir()
	out, code := execBench(t, "envs", "setup", "all", "--dry-run", "--root", root)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, want := range []string{"cd " + root, ".venvs/vllm", ".venvs/sglang", ".venvs/trtllm", "TensorRT-LLM", "pypi.nvidia.com"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(root, ".venvs")); !os.IsNotExist(err) {
		t.Errorf("dry run created .venvs: %v", err)
	}
	if _, code := execBench(t, "envs", "setup", "tgi", "--dry-run"); code == 0 {
		t.Error("unknown backend accepted")
	}
}

func TestEnvsVersionsJSON(t *testing.T) {
	clearPythonEnv(t)
	root := t.TempDir()
	fakeEnvPython(t, root, "sglang", "0.5.7")
	out, code := execBench(t, "envs", "versions", "--json", "--root", root)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	var v map[string]string
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if v["sglang"] != "0.5.7" || v["sglang_python_version"] != "3.10.19" || v["sglang_torch"] != "2.9.0" ||
		v["sglang_python"] != filepath.Join(root, ".venvs", "sglang", "bin", "python") ||
		v["vllm"] != "not set up (bench envs setup vllm)" {
		t.Errorf("versions %v", v)
	}
}
