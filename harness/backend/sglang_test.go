package backend

import (
	"context"
	"strings"
	"testing"
)

// The exact SGLang argv + environment (testdata/sglang_launch.golden) and
// the original harness's command for its baseline flags.
func TestSGLangLaunchGolden(t *testing.T) {
	root := t.TempDir()
	python := fakeVenv(t, root, "sglang", probeSGLang)
	cases := []struct {
		title string
		mod   func(*ThirdPartyOptions)
		run   ThirdPartyRun
	}{
		{"original defaults (triton attention, flashinfer sampling, fp16)", nil, testRun(root, nil)},
		{"GPU 0, flashinfer attention, pytorch sampling, fp32, 64 running requests, §6 flags through --sglang-args",
			func(o *ThirdPartyOptions) {
				o.SGLangAttentionBackend, o.SGLangSamplingBackend, o.Dtype = "flashinfer", "pytorch", "fp32"
				o.SGLangMaxRunningRequests = 64
				o.SGLangArgs = "--served-model-name gpt2 --mem-fraction-static 0.85 --disable-radix-cache --random-seed 0 --cuda-graph-max-bs 64 --log-level warning"
			}, ThirdPartyRun{Root: root, GPU: "0", ContextLen: 1015, Getenv: func(string) string { return "" }}},
		{"--api-key: passed as --api-key (before --sglang-args), recorded as ***",
			func(o *ThirdPartyOptions) { o.SGLangArgs = "--random-seed 0" }, withKey(testRun(root, nil))},
	}
	var out strings.Builder
	for _, c := range cases {
		o := DefaultThirdParty()
		if c.mod != nil {
			c.mod(&o)
		}
		s, err := SGLang(context.Background(), &o, c.run)
		if err != nil {
			t.Fatalf("%s: %v", c.title, err)
		}
		out.WriteString(describeLaunch(c.title, s, nil, "127.0.0.1", 18002, root))
	}
	compareGolden(t, "sglang_launch.golden", []byte(out.String()))

	o := DefaultThirdParty()
	s, _ := SGLang(context.Background(), &o, testRun(root, nil))
	original := python + " -m sglang.launch_server --model-path gpt2 --host 127.0.0.1 --port 18002 --context-length 1024" +
		" --stream-interval 1 --stream-output --attention-backend triton --sampling-backend flashinfer --dtype float16"
	if got := strings.Join(s.Command("127.0.0.1", 18002), " "); got != original {
		t.Errorf("argv\n got %s\nwant %s", got, original)
	}
	if s.Env["SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION"] != "0" || s.Version(context.Background()) != "0.5.7" {
		t.Errorf("env %v", s.Env)
	}
	if strings.Join(s.Ready.Paths, " ") != "/health /v1/models" {
		t.Errorf("SGLang must wait for /health (503 until warm), got %v", s.Ready.Paths)
	}
}
