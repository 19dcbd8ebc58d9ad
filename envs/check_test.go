package envs

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// fakePython is an interpreter that prints a fixed probe result, so every
// check status can be produced without the real packages.
func fakePython(t *testing.T, path, probeJSON string) string {
	t.Helper()
	return writeExe(t, path, "#!/bin/sh\necho '[TensorRT-LLM] noise before the result'\necho 'ROSEINFER_PROBE "+probeJSON+"'\n")
}

// `bench envs check` on a machine with nothing installed: every backend
// "not set up", the fix names the setup command, and Ready is false.
func TestCheckNothingInstalled(t *testing.T) {
	root := t.TempDir()
	rows := Check(context.Background(), Backends, CheckOptions{Layout: Layout{Root: root}, Getenv: envFunc(nil)})
	var out bytes.Buffer
	WriteCheckTable(&out, rows)
	golden(t, "check_nothing.golden", bytes.ReplaceAll(out.Bytes(), []byte(root), []byte("$ROOT")))
	for _, r := range rows {
		if r.Ready() || r.Status != StatusNotSetUp || r.Fix != "bench envs setup "+r.Backend.Name {
			t.Errorf("%s: %+v", r.Backend.Name, r)
		}
	}
}

func TestCheckStatuses(t *testing.T) {
	root := t.TempDir()
	l := Layout{Root: root}
	vllm, _ := Lookup("vllm")
	sglang, _ := Lookup("sglang")
	trt, _ := Lookup("trtllm")
	// vLLM imports and sees a GPU.
	fakePython(t, l.VenvPython(vllm), `{"python_version":"3.10.19","found":true,"version":"0.13.0","torch":"2.9.0","import_ok":true,"import_s":12.5,"cuda":{"available":true,"device_count":1,"devices":["NVIDIA H100 80GB HBM3"]}}`)
	// SGLang imports but torch sees no GPU.
	sgPy := fakePython(t, filepath.Join(root, "opt", "sglang", "bin", "python"), `{"python_version":"3.10.19","found":true,"version":"0.5.7","torch":"2.9.1","import_ok":true,"cuda":{"available":false,"device_count":0,"devices":[]}}`)
	// TensorRT-LLM is installed but its import fails (on Python 3.11, not the pinned 3.12).
	trtPy := fakePython(t, filepath.Join(root, "opt", "trt", "bin", "python"), `{"python_version":"3.11.7","found":true,"version":"1.1.0","torch":null,"import_ok":false,"import_error":"ImportError: libmpi.so.40: cannot open shared object file","cuda":null}`)
	rows := Check(context.Background(), []Backend{vllm, sglang, trt}, CheckOptions{
		Layout: l, Flags: map[string]string{"sglang": sgPy}, Getenv: envFunc(map[string]string{"TRTLLM_PYTHON": trtPy}),
	})
	want := []string{StatusOK, StatusNoGPU, StatusImportFails}
	for i, r := range rows {
		if r.Status != want[i] {
			t.Errorf("%s: status %q, want %q (%s)", r.Backend.Name, r.Status, want[i], r.Problem)
		}
	}
	var out bytes.Buffer
	WriteCheckTable(&out, rows)
	// The temporary root's length varies and the table's columns follow it:
	// compare with runs of spaces squeezed.
	got := bytes.ReplaceAll(out.Bytes(), []byte(root), []byte("$ROOT"))
	golden(t, "check_statuses.golden", regexp.MustCompile(` {2,}`).ReplaceAll(got, []byte("  ")))
}

func TestCheckNotInstalledAndBroken(t *testing.T) {
	root := t.TempDir()
	vllm, _ := Lookup("vllm")
	empty := fakePython(t, filepath.Join(root, "a", "bin", "python"), `{"python_version":"3.10.1","found":false,"version":null}`)
	broken := writeExe(t, filepath.Join(root, "b", "bin", "python"), "#!/bin/sh\nexit 1\n")
	for _, c := range []struct{ python, status, fix string }{
		{empty, StatusNotInstalled, "bench envs setup vllm"},
		{broken, StatusBroken, "rm -rf " + filepath.Join(root, "b")},
		{filepath.Join(root, "nope"), StatusBadPath, "point --vllm-python at a Python interpreter"},
	} {
		rows := Check(context.Background(), []Backend{vllm}, CheckOptions{Layout: Layout{Root: root},
			Flags: map[string]string{"vllm": c.python}, Getenv: envFunc(nil), Timeout: 30 * time.Second})
		if rows[0].Status != c.status || !strings.Contains(rows[0].Fix, c.fix) {
			t.Errorf("%s: %+v", c.python, rows[0])
		}
	}
}

func TestVersionsKeys(t *testing.T) {
	v, torch := "0.13.0", "2.9.0"
	b, _ := Lookup("vllm")
	got := Versions(b, "/e/bin/python", &Probe{PythonVersion: "3.10.19", Version: &v, Torch: &torch})
	want := map[string]string{"vllm": "0.13.0", "vllm_python": "/e/bin/python", "vllm_python_version": "3.10.19", "vllm_torch": "2.9.0"}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %q, want %q", k, got[k], w)
		}
	}
	trt, _ := Lookup("trtllm")
	if got := Versions(trt, "/p", &Probe{PythonVersion: "3.12.3"}); got["tensorrt_llm"] != "not installed" {
		t.Errorf("missing package: %v", got)
	}
}

// copyPython copies the embedded Python files and the unit tests into a
// temporary directory, so compiling and testing them leaves no
// __pycache__ in the source tree.
func copyPython(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := WriteDrivers(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"probe.py", "test_offline_drivers.py"} {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// The drivers compile (py_compile) and their stdlib unit tests pass with the
// library calls stubbed out.
func TestPythonDriverUnitTests(t *testing.T) {
	py := needPython(t)
	dir := copyPython(t)
	names, _ := filepath.Glob(filepath.Join(dir, "*.py"))
	compile := exec.Command(py, append([]string{"-m", "py_compile"}, names...)...)
	if out, err := compile.CombinedOutput(); err != nil {
		t.Fatalf("py_compile: %v\n%s", err, out)
	}
	cmd := exec.Command(py, "-m", "unittest", "-v", "test_offline_drivers")
	cmd.Dir = dir
	cmd.Env = MergeEnv(os.Environ(), map[string]string{"PYTHONPATH": "", "PYTHONDONTWRITEBYTECODE": "1"})
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python unit tests failed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "OK") {
		t.Errorf("unexpected unittest output:\n%s", out)
	}
}
