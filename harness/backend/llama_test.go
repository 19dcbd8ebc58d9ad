package backend

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The llama-server argv (N slots, each with the model's full context, every
// layer on the GPU, flash attention on) and its readiness and request shape.
func TestLlamaLaunchGolden(t *testing.T) {
	root := t.TempDir()
	bin := filepath.Join(root, "llama.cpp", "build", "bin", "llama-server")
	model := filepath.Join(root, "gpt2-f16.gguf")
	for _, f := range []string{bin, model} {
		os.MkdirAll(filepath.Dir(f), 0o755)
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var out strings.Builder
	for _, c := range []struct {
		title string
		mod   func(*ThirdPartyOptions)
		run   ThirdPartyRun
	}{
		{"16 slots (default), GPT-2 context", nil, ThirdPartyRun{}},
		{"8 slots, GPU 0, extra flags", func(o *ThirdPartyOptions) { o.LlamaParallel, o.LlamaArgs = 8, "--metrics -s 0" },
			ThirdPartyRun{GPU: "0", ContextLen: 1015}},
		{"--api-key: passed as --api-key (before --llama-args), recorded as ***", func(o *ThirdPartyOptions) { o.LlamaArgs = "--metrics" },
			withKey(ThirdPartyRun{})},
	} {
		o := DefaultThirdParty()
		o.LlamaServerBin, o.LlamaModel = bin, model
		if c.mod != nil {
			c.mod(&o)
		}
		s, err := Llama(&o, c.run)
		if err != nil {
			t.Fatal(err)
		}
		out.WriteString(describeLaunch(c.title, s, nil, "127.0.0.1", 18004, root))
	}
	compareGolden(t, "llama_launch.golden", []byte(out.String()))

	o := DefaultThirdParty()
	o.LlamaServerBin, o.LlamaModel = bin, model
	s, _ := ThirdParty(context.Background(), NameLlama, &o, ThirdPartyRun{})
	sketch := bin + " -m " + model + " --host 127.0.0.1 --port 18004 -c 16384 -np 16 -ngl all -fa on --no-webui"
	if got := strings.Join(s.Command("127.0.0.1", 18004), " "); got != sketch {
		t.Errorf("argv\n got %s\nwant %s", got, sketch)
	}
	if !s.ModelFromServer || s.Quirks.IncludeUsage || !s.Quirks.PromptAsTokenIDs {
		t.Errorf("spec %+v", s)
	}
	o.LlamaModel = ""
	if _, err := Llama(&o, ThirdPartyRun{}); err == nil || !strings.Contains(err.Error(), "--llama-model") {
		t.Errorf("no model: %v", err)
	}
}
