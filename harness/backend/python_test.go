package backend

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

var updateGolden = flag.Bool("update", false, "rewrite golden files in testdata/")

// fakeVenv makes <root>/.venvs/<name>/bin/python answer the version probe
// as an environment with the package installed; any other call runs the
// real python3 (when there is one) with fakelib on its path, so offline
// drivers run against fake libraries.
func fakeVenv(t *testing.T, root, name, probeJSON string) string {
	t.Helper()
	python := filepath.Join(root, ".venvs", name, "bin", "python")
	fakelib, _ := filepath.Abs(filepath.Join("testdata", "python_fakelib"))
	script := "#!/bin/sh\n" +
		"if [ \"$1\" = \"-c\" ]; then echo 'ROSEINFER_PROBE " + probeJSON + "'; exit 0; fi\n" +
		"PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=" + fakelib + " exec python3 \"$@\"\n"
	if err := os.MkdirAll(filepath.Dir(python), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(python, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return python
}

const (
	probeVLLM   = `{"python_version":"3.10.19","found":true,"version":"0.13.0","torch":"2.9.0","transformers":"4.57.1"}`
	probeSGLang = `{"python_version":"3.10.19","found":true,"version":"0.5.7","torch":"2.9.1"}`
	probeTRTLLM = `{"python_version":"3.12.3","found":true,"version":"1.1.0","torch":"2.8.0"}`
)

// testRun is a run with every environment under root and a fixed harness
// environment.
func testRun(root string, env map[string]string) ThirdPartyRun {
	return ThirdPartyRun{Root: root, Getenv: func(k string) string { return env[k] }}
}

// withKey is r with --api-key given.
func withKey(r ThirdPartyRun) ThirdPartyRun {
	r.APIKey = "sk-golden-key"
	return r
}

func compareGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *updateGolden {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./harness/backend -run %s -update writes it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}

// describeLaunch is what a golden file records for one case: the exact
// argv the harness executes (prefix included) and the environment
// overrides, sorted.
func describeLaunch(title string, s Spec, prefix []string, host string, port int, root string) string {
	var b strings.Builder
	b.WriteString("## " + title + "\n")
	argv := append(append([]string{}, prefix...), s.Command(host, port)...)
	if s.APIKey != "" && !slices.Contains(argv, s.APIKey) {
		b.WriteString("(the key is not on the command line)\n")
	}
	// As Launch records it: the key as ***.
	b.WriteString("argv: " + strings.Join(RedactArgv(argv, s.APIKey), " ") + "\n")
	keys := make([]string, 0, len(s.Env))
	for k := range s.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString("env: " + k + "=" + s.Env[k] + "\n")
	}
	b.WriteString("ready: " + strings.Join(s.Ready.Paths, " ") + "\n")
	if s.APIKey != "" {
		b.WriteString("requests send: Authorization: Bearer " + Redacted + "\n")
	}
	b.WriteString("\n")
	return strings.ReplaceAll(b.String(), root, "$ROOT")
}

func TestRegisterThirdPartyFlags(t *testing.T) {
	o := DefaultThirdParty()
	fs := pflag.NewFlagSet("online", pflag.ContinueOnError)
	fs.String("dtype", "", "the command's own --dtype")
	RegisterThirdPartyFlags(fs, &o)
	err := fs.Parse([]string{"--vllm-python", "/opt/v/bin/python", "--vllm-attention-backend", "auto",
		"--vllm-no-async-scheduling", "--sglang-attention-backend", "flashinfer", "--trtllm-backend", "pytorch",
		"--llama-model", "g.gguf", "--backend-cmd", "srv --port {port}", "--tokenizer", "tok"})
	if err != nil {
		t.Fatal(err)
	}
	if o.VLLMPython != "/opt/v/bin/python" || o.VLLMAttentionBackend != "auto" || o.VLLMAsyncScheduling ||
		o.SGLangAttentionBackend != "flashinfer" || o.TRTLLMBackend != "pytorch" || o.LlamaModel != "g.gguf" ||
		o.BackendCmd != "srv --port {port}" || o.Tokenizer != "tok" || o.Dtype != "fp16" {
		t.Errorf("parsed %+v", o)
	}
	// The positive form turns it back on; the last one given wins.
	if err := fs.Parse([]string{"--vllm-async-scheduling"}); err != nil || !o.VLLMAsyncScheduling {
		t.Errorf("--vllm-async-scheduling: %v %v", err, o.VLLMAsyncScheduling)
	}
	// --dtype stays the command's own.
	if fs.Lookup("dtype").Usage != "the command's own --dtype" {
		t.Error("--dtype was registered twice")
	}
}

func TestCommonEnv(t *testing.T) {
	r := ThirdPartyRun{GPU: "1", ServerCPUs: "0-3,8"}
	env := r.commonEnv()
	want := map[string]string{"CUDA_VISIBLE_DEVICES": "1", "OMP_NUM_THREADS": "5", "MKL_NUM_THREADS": "5", "TOKENIZERS_PARALLELISM": "false"}
	if len(env) != len(want) {
		t.Errorf("env %v, want %v", env, want)
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s=%q, want %q", k, env[k], v)
		}
	}
	if env := (ThirdPartyRun{}).commonEnv(); len(env) != 1 {
		t.Errorf("unpinned, no GPU: %v (want only TOKENIZERS_PARALLELISM)", env)
	}
	for list, n := range map[string]int{"": 0, "0": 1, "0-15,32": 17, "3,3,4": 2, "x": 0, "4-2": 0} {
		if got := countCPUs(list); got != n {
			t.Errorf("countCPUs(%q) = %d, want %d", list, got, n)
		}
	}
}

// A backend that cannot run here is an *Unavailable naming the fix; a bad
// flag is a plain error, so a typo is not mistaken for a missing install.
func TestThirdPartyUnavailable(t *testing.T) {
	root := t.TempDir()
	noEnv := testRun(root, nil)
	o := DefaultThirdParty()
	cases := []struct {
		name, backend, reason, fix string
		mod                        func(*ThirdPartyOptions)
	}{
		{"vllm without an environment", NameVLLM, "no vLLM environment", "bench envs setup vllm", nil},
		{"sglang without an environment", NameSGLang, "no SGLang environment", "bench envs setup sglang", nil},
		{"trtllm without an environment", NameTRTLLM, "no TensorRT-LLM environment", "bench envs setup trtllm", nil},
		{"named interpreter missing", NameVLLM, "is not an executable file", "bench envs setup vllm",
			func(o *ThirdPartyOptions) { o.VLLMPython = filepath.Join(root, "nope") }},
		{"llama without the binary", NameLlama, "is not an executable file", "llama-server",
			func(o *ThirdPartyOptions) { o.LlamaServerBin = filepath.Join(root, "nope") }},
		{"custom without a command", NameCustom, "no --backend-cmd", "--backend-cmd", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			oo := o
			if c.mod != nil {
				c.mod(&oo)
			}
			_, err := ThirdParty(context.Background(), c.backend, &oo, noEnv)
			var u *Unavailable
			if !errors.As(err, &u) {
				t.Fatalf("error %v (%T), want *Unavailable", err, err)
			}
			if !strings.Contains(u.Reason, c.reason) || !strings.Contains(u.Fix, c.fix) || u.Backend != c.backend {
				t.Errorf("got %+v", u)
			}
			rec := u.Record()
			if !rec.Skipped || rec.Backend != c.backend || rec.Error != u.Reason || rec.FixHint != u.Fix {
				t.Errorf("record %+v", rec)
			}
			if !strings.Contains(err.Error(), "fix: "+u.Fix) {
				t.Errorf("message %q does not name the fix", err)
			}
		})
	}
}

func TestThirdPartyPackageMissingInEnv(t *testing.T) {
	root := t.TempDir()
	fakeVenv(t, root, "sglang", `{"python_version":"3.10.19","found":false,"version":null}`)
	o := DefaultThirdParty()
	_, err := ThirdParty(context.Background(), NameSGLang, &o, testRun(root, nil))
	var u *Unavailable
	if !errors.As(err, &u) || !strings.Contains(u.Reason, "sglang is not installed") || u.Fix != "bench envs setup sglang" {
		t.Errorf("got %v", err)
	}
}

func TestThirdPartyBadFlags(t *testing.T) {
	root := t.TempDir()
	for _, c := range []struct {
		backend string
		mod     func(*ThirdPartyOptions)
		want    string
	}{
		{NameVLLM, func(o *ThirdPartyOptions) { o.Dtype = "fp8" }, "--dtype"},
		{NameSGLang, func(o *ThirdPartyOptions) { o.SGLangArgs = `--x "unterminated` }, "--sglang-args"},
		{NameTRTLLM, func(o *ThirdPartyOptions) { o.TRTLLMBackend = "onnx" }, "--trtllm-backend"},
		{NameLlama, func(o *ThirdPartyOptions) { o.LlamaParallel = 0 }, "--llama-parallel"},
		{NameCustom, func(o *ThirdPartyOptions) { o.BackendCmd = "srv --port 8000" }, "{port}"},
		{"tgi", nil, "not a third-party backend"},
	} {
		o := DefaultThirdParty()
		if c.mod != nil {
			c.mod(&o)
		}
		_, err := ThirdParty(context.Background(), c.backend, &o, testRun(root, nil))
		var u *Unavailable
		if err == nil || errors.As(err, &u) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want a flag error about %s", c.backend, err, c.want)
		}
	}
}
