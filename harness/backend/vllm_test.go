package backend

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// The exact vLLM argv + environment under representative flag sets
// (testdata/vllm_launch.golden), and the original harness's command for its
// baseline flags, written out here.
func TestVLLMLaunchGolden(t *testing.T) {
	root := t.TempDir()
	python := fakeVenv(t, root, "vllm", probeVLLM)
	taskset := []string{"/usr/bin/taskset", "-c", "0-3"}
	cases := []struct {
		title  string
		mod    func(*ThirdPartyOptions)
		run    ThirdPartyRun
		prefix []string
	}{
		{"original defaults (--vllm-attention-backend flashinfer: --max-num-seqs 128 by default)", nil, testRun(root, nil), nil},
		{"pinned to 0-3 on GPU 1; auto attention, no async scheduling, bf16, own tokenizer, 256 seqs, context 512",
			func(o *ThirdPartyOptions) {
				o.VLLMAttentionBackend, o.VLLMAsyncScheduling, o.Dtype = "auto", false, "bf16"
				o.Tokenizer, o.VLLMMaxNumSeqs = "/models/gpt2", 256
			},
			ThirdPartyRun{Root: root, Model: "/models/gpt2", ContextLen: 512, GPU: "1", ServerCPUs: "0-3",
				Getenv: func(k string) string { return map[string]string{"PYTHONPATH": "/src"}[k] }}, taskset},
		{"flash_attn (no automatic --max-num-seqs), dtype auto, §6 fairness flags through --vllm-args",
			func(o *ThirdPartyOptions) {
				o.VLLMAttentionBackend, o.Dtype = "flash_attn", "auto"
				o.VLLMArgs = "--served-model-name gpt2 --gpu-memory-utilization 0.9 --no-enable-prefix-caching --seed 0 --disable-uvicorn-access-log --uvicorn-log-level warning"
			}, testRun(root, nil), nil},
		{"--api-key: passed as --api-key (before --vllm-args), recorded as ***",
			func(o *ThirdPartyOptions) { o.VLLMArgs = "--seed 0" }, withKey(testRun(root, nil)), nil},
	}
	var out strings.Builder
	for _, c := range cases {
		o := DefaultThirdParty()
		if c.mod != nil {
			c.mod(&o)
		}
		s, err := VLLM(context.Background(), &o, c.run)
		if err != nil {
			t.Fatalf("%s: %v", c.title, err)
		}
		out.WriteString(describeLaunch(c.title, s, c.prefix, "127.0.0.1", 18001, root))
	}
	compareGolden(t, "vllm_launch.golden", []byte(out.String()))

	o := DefaultThirdParty()
	s, err := VLLM(context.Background(), &o, testRun(root, nil))
	if err != nil {
		t.Fatal(err)
	}
	original := python + " -m vllm.entrypoints.openai.api_server --model gpt2 --host 127.0.0.1 --port 18001" +
		" --max-model-len 1024 --disable-log-requests --disable-log-stats --async-scheduling" +
		" --attention-backend flashinfer --max-num-seqs 128 --dtype float16"
	if got := strings.Join(s.Command("127.0.0.1", 18001), " "); got != original {
		t.Errorf("argv\n got %s\nwant %s", got, original)
	}
	if s.Label != "vllm" || s.Python != python || s.Version(context.Background()) != "0.13.0" ||
		s.Versions["vllm_python_version"] != "3.10.19" || s.Versions["vllm_torch"] != "2.9.0" ||
		s.Versions["vllm_python"] != filepath.Join(root, ".venvs", "vllm", "bin", "python") {
		t.Errorf("spec %+v versions %v", s, s.Versions)
	}
	if s.Quirks != vllmQuirks || len(s.Ready.Paths) != 2 {
		t.Errorf("quirks %+v ready %+v", s.Quirks, s.Ready)
	}
}

func TestVLLMMaxNumSeqs(t *testing.T) {
	for _, c := range []struct {
		backend string
		flag    int
		want    int
	}{{"flashinfer", 0, 128}, {"flashinfer", 64, 64}, {"flash_attn", 0, 0}, {"auto", 0, 0}, {"triton_attn", 32, 32}} {
		o := ThirdPartyOptions{VLLMAttentionBackend: c.backend, VLLMMaxNumSeqs: c.flag}
		if got := VLLMMaxNumSeqs(&o); got != c.want {
			t.Errorf("%s/%d: %d, want %d", c.backend, c.flag, got, c.want)
		}
	}
}
