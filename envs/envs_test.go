package envs

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

// writeExe writes an executable file (a fake interpreter or a venv python).
func writeExe(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func envFunc(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./envs -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file:\n--- got ---\n%s\n--- want ---\n%s", name, got, want)
	}
}

func TestResolveOrder(t *testing.T) {
	root := t.TempDir()
	l := Layout{Root: root}
	vllm, _ := Lookup("vllm")
	flagPy := writeExe(t, filepath.Join(root, "opt", "flag-python"), "")
	envPy := writeExe(t, filepath.Join(root, "opt", "env-python"), "")
	shortPy := writeExe(t, filepath.Join(root, "opt", "short-python"), "")
	notExe := filepath.Join(root, "opt", "missing-python")

	cases := []struct {
		name        string
		flag        string
		env         map[string]string
		venv        bool
		wantPath    string
		wantSource  string
		wantProblem string // substring; "" = found
	}{
		{"flag wins over everything", flagPy, map[string]string{"ROSELLM_VLLM_PYTHON": envPy}, true, flagPy, "--vllm-python", ""},
		{"ROSELLM_ variable before the short one", "", map[string]string{"ROSELLM_VLLM_PYTHON": envPy, "VLLM_PYTHON": shortPy}, true, envPy, "$ROSELLM_VLLM_PYTHON", ""},
		{"short variable", "", map[string]string{"VLLM_PYTHON": shortPy}, true, shortPy, "$VLLM_PYTHON", ""},
		{"venv last", "", nil, true, filepath.Join(root, ".venvs", "vllm", "bin", "python"), ".venvs/vllm", ""},
		{"nothing: skipped with the setup command", "", nil, false, "", "", "no vLLM environment"},
		{"named path that is not executable is reported", notExe, nil, true, notExe, "--vllm-python", "is not an executable file"},
		{"named variable that is not executable is reported", "", map[string]string{"VLLM_PYTHON": notExe}, true, notExe, "$VLLM_PYTHON", "is not an executable file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			venvPy := l.VenvPython(vllm)
			os.RemoveAll(filepath.Join(root, ".venvs"))
			if c.venv {
				writeExe(t, venvPy, "")
			}
			in := Resolve(vllm, c.flag, l, envFunc(c.env))
			if in.Path != c.wantPath || in.Source != c.wantSource {
				t.Errorf("got %q from %q, want %q from %q", in.Path, in.Source, c.wantPath, c.wantSource)
			}
			if c.wantProblem == "" {
				if !in.Found() {
					t.Errorf("not found: %s", in.Problem)
				}
			} else if in.Found() || !strings.Contains(in.Problem, c.wantProblem) {
				t.Errorf("problem %q, want it to contain %q", in.Problem, c.wantProblem)
			}
			if in.Fix() != "bench envs setup vllm" {
				t.Errorf("fix %q", in.Fix())
			}
		})
	}
}

func TestTRTLLMEnvFromVenv(t *testing.T) {
	root := t.TempDir()
	venv := filepath.Join(root, "venv-trt")
	python := writeExe(t, filepath.Join(venv, "bin", "python"), "")
	sp := filepath.Join(venv, "lib", "python3.12", "site-packages")
	for _, d := range []string{"tensorrt_libs", "nvidia/cublas/lib", "nvidia/cuda_runtime/lib", "nvidia/nccl/include"} {
		if err := os.MkdirAll(filepath.Join(sp, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	trt, _ := Lookup("trtllm")
	got := ProcessEnv(trt, python, "/usr/local/cuda/lib64")
	want := strings.Join([]string{
		filepath.Join(sp, "tensorrt_libs"),
		filepath.Join(sp, "nvidia", "cublas", "lib"),
		filepath.Join(sp, "nvidia", "cuda_runtime", "lib"),
		"/usr/local/cuda/lib64",
	}, ":")
	if got["LD_LIBRARY_PATH"] != want {
		t.Errorf("LD_LIBRARY_PATH\n got %s\nwant %s", got["LD_LIBRARY_PATH"], want)
	}
	if v, ok := got["PYTHONPATH"]; !ok || v != "" {
		t.Errorf("PYTHONPATH not emptied: %q %v", v, ok)
	}
	vllm, _ := Lookup("vllm")
	if env := ProcessEnv(vllm, python, "/x"); len(env) != 1 {
		t.Errorf("vLLM env %v: want only PYTHONPATH", env)
	}
}

func TestMergeEnvOverridesAndOrders(t *testing.T) {
	got := MergeEnv([]string{"A=1", "PYTHONPATH=/src", "B=2"}, map[string]string{"PYTHONPATH": "", "C": "3"})
	want := []string{"A=1", "B=2", "C=3", "PYTHONPATH="}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("got %v, want %v", got, want)
	}
}

// The exact commands `bench envs setup --dry-run` prints, with uv and with
// python -m venv + pip, for every backend.
func TestSetupDryRunGolden(t *testing.T) {
	root := t.TempDir()
	// A checkout has the pins at envs/requirements/; trtllm's are left out
	// to show the embedded copy being written.
	for _, name := range []string{"vllm.txt", "sglang.txt"} {
		writeExe(t, filepath.Join(root, "envs", "requirements", name), "x\n")
	}
	// An existing sglang venv is reused.
	writeExe(t, filepath.Join(root, ".venvs", "sglang", "bin", "python"), "")
	var out bytes.Buffer
	for _, tools := range []Tools{{UV: "uv"}, {Python: "python3.10"}, {}} {
		for _, b := range Backends {
			t := tools
			if t.Python != "" {
				t.Python = "python" + b.Python
			}
			PlanSetup(b, Layout{Root: root}, t).Print(&out)
			out.WriteString("\n")
		}
	}
	golden(t, "setup_dryrun.golden", bytes.ReplaceAll(out.Bytes(), []byte(root), []byte("$ROOT")))
}

func TestSetupRunWritesPinsAndRunsSteps(t *testing.T) {
	root := t.TempDir()
	log := filepath.Join(root, "calls.log")
	fakeUV := writeExe(t, filepath.Join(root, "bin", "uv"), "#!/bin/sh\necho \"$@\" >> "+log+"\n")
	b, _ := Lookup("trtllm")
	p := PlanSetup(b, Layout{Root: root}, Tools{UV: fakeUV})
	var out bytes.Buffer
	if err := p.Run(context.Background(), &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	pins, err := os.ReadFile(filepath.Join(root, ".venvs", "trtllm.requirements.txt"))
	if err != nil || !strings.Contains(string(pins), "tensorrt_llm==1.1.0") {
		t.Errorf("embedded pins not written: %v %q", err, pins)
	}
	calls, _ := os.ReadFile(log)
	want := "venv --python 3.12 .venvs/trtllm\n" +
		"pip install --python .venvs/trtllm/bin/python --index-strategy unsafe-best-match --extra-index-url https://pypi.nvidia.com -r .venvs/trtllm.requirements.txt\n"
	if string(calls) != want {
		t.Errorf("calls\n%s\nwant\n%s", calls, want)
	}
	missing := PlanSetup(b, Layout{Root: root}, Tools{})
	if err := missing.Run(context.Background(), &out); err == nil || !strings.Contains(err.Error(), "install uv") {
		t.Errorf("plan without tools ran: %v", err)
	}
}

func TestPinsEmbedded(t *testing.T) {
	want := map[string]string{"vllm": "vllm==0.13.0", "sglang": "sglang==0.5.7", "trtllm": "tensorrt_llm==1.1.0"}
	for _, b := range Backends {
		data, err := files.ReadFile(b.Requirements)
		if err != nil || !strings.Contains(string(data), want[b.Name]+"\n") {
			t.Errorf("%s: %v, pins %q", b.Name, err, data)
		}
	}
	if !strings.Contains(ProbeScript(), "ROSEINFER_PROBE") {
		t.Error("probe script not embedded")
	}
}

func needPython(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: Python parts not tested here")
	}
	return py
}

// The real probe script, run by a real interpreter, on a module every
// Python has.
func TestProbeRealPython(t *testing.T) {
	py := needPython(t)
	b := Backend{Name: "json", Module: "json", Dist: "no-such-dist-xyz", TorchDist: "no-such-torch-xyz"}
	p, err := RunProbe(context.Background(), b, py, ProbeOptions{Import: true, Timeout: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Found || p.ImportOK == nil || !*p.ImportOK || p.Torch != nil || p.PythonVersion == "" {
		t.Errorf("probe %+v", p)
	}
	b.Module = "no_such_module_xyz"
	p, err = RunProbe(context.Background(), b, py, ProbeOptions{Import: true, Timeout: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if p.Found || p.ImportOK == nil || *p.ImportOK || p.ImportError == nil || !strings.Contains(*p.ImportError, "No module named") {
		t.Errorf("probe of a missing module %+v", p)
	}
}

func TestProbeFailures(t *testing.T) {
	dir := t.TempDir()
	b, _ := Lookup("vllm")
	silent := writeExe(t, filepath.Join(dir, "silent"), "#!/bin/sh\necho hello\n")
	if _, err := RunProbe(context.Background(), b, silent, ProbeOptions{}); err == nil || !strings.Contains(err.Error(), "no result line") {
		t.Errorf("silent interpreter: %v", err)
	}
	crash := writeExe(t, filepath.Join(dir, "crash"), "#!/bin/sh\necho 'fatal: broken' >&2\nexit 3\n")
	if _, err := RunProbe(context.Background(), b, crash, ProbeOptions{}); err == nil || !strings.Contains(err.Error(), "fatal: broken") {
		t.Errorf("crashing interpreter: %v", err)
	}
	hang := writeExe(t, filepath.Join(dir, "hang"), "#!/bin/sh\nexec sleep 30\n")
	if _, err := RunProbe(context.Background(), b, hang, ProbeOptions{Timeout: 200 * time.Millisecond}); err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("hung interpreter: %v", err)
	}
}
