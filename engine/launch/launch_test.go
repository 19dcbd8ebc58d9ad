package launch

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roseinfer/roseinfer/engine"
	"github.com/roseinfer/roseinfer/engine/device"
	"github.com/roseinfer/roseinfer/engine/device/cuda"
	"github.com/roseinfer/roseinfer/engine/model"
	"github.com/roseinfer/roseinfer/engine/profile/phase"
	"github.com/roseinfer/roseinfer/engine/sample"
	qwen3data "github.com/roseinfer/roseinfer/engine/tokenizer/data/qwen3"
)

func TestValidateRejects(t *testing.T) {
	for name, mod := range map[string]func(*Options){
		"device":        func(o *Options) { o.Device = "tpu" },
		"max-num-seqs":  func(o *Options) { o.MaxNumSeqs = 0 },
		"batched":       func(o *Options) { o.MaxNumBatchedTokens = 0 },
		"chunk":         func(o *Options) { o.PrefillChunkSize = 0 },
		"block-size":    func(o *Options) { o.BlockSizeTokens = 0 },
		"kv-tokens":     func(o *Options) { o.KVCacheTokens = -1 },
		"sim-step":      func(o *Options) { o.SimStep = -time.Microsecond },
		"gpu-mem-zero":  func(o *Options) { o.GPUMemoryUtilization = 0 },
		"gpu-mem-above": func(o *Options) { o.GPUMemoryUtilization = 1.5 },
		"dtype":         func(o *Options) { o.DType = "int8" },
		"dtype-cpu":     func(o *Options) { o.Device, o.DType = "cpu", "bfloat16" },
		"dtype-sim":     func(o *Options) { o.Device, o.DType = "sim", "float32" },
	} {
		o := Defaults()
		mod(&o)
		if _, err := Resolve(o, nil); err == nil {
			t.Errorf("%s: invalid options accepted", name)
		}
	}
	o := Defaults()
	if err := o.Validate(); err != nil {
		t.Errorf("defaults rejected: %v", err)
	}
	for _, dt := range []string{"auto", "float32", "float"} { // cpu computes in fp32
		o := Defaults()
		o.Device, o.DType = "cpu", dt
		if _, err := Resolve(o, nil); err != nil {
			t.Errorf("--device cpu --dtype %s rejected: %v", dt, err)
		}
	}
}

// TestComputeDTypes: which --dtype each device takes for each family, and
// that a refusal names what the device does take.
func TestComputeDTypes(t *testing.T) {
	gpt2, _ := model.Lookup("gpt2")
	q3, _ := model.Lookup("qwen3")
	for _, tc := range []struct {
		dtype, dev string
		fam        *model.Family
		ok         bool
	}{
		{"float32", "cpu", q3, true}, {"bfloat16", "cpu", q3, false}, {"float16", "cpu", gpt2, false},
		{"bfloat16", "cuda", q3, true}, {"float32", "cuda", q3, true}, {"float16", "cuda", q3, false},
		{"float16", "cuda", gpt2, true}, {"float32", "cuda", gpt2, false}, {"bfloat16", "cuda", gpt2, false},
		{"auto", "sim", gpt2, true}, {"float16", "sim", gpt2, false},
	} {
		err := checkDType(canonicalDType(tc.dtype), tc.dev, tc.fam)
		if (err == nil) != tc.ok {
			t.Errorf("--dtype %s on %s for %s: error %v, want ok=%v", tc.dtype, tc.dev, tc.fam.Title, err, tc.ok)
		}
		if err != nil && tc.dev != "sim" && !strings.Contains(err.Error(), computeDTypes(tc.dev, tc.fam)[0]) {
			t.Errorf("--dtype %s on %s: %q does not name what the device takes", tc.dtype, tc.dev, err)
		}
	}
	for alias, want := range map[string]string{"float": "float32", "half": "float16", "": "auto", "fp32": ""} {
		if got := canonicalDType(alias); got != want {
			t.Errorf("canonicalDType(%q) = %q, want %q", alias, got, want)
		}
	}
}

// TestNumKVBlocks: expected counts worked out by hand from the sizing rule
// (16-token blocks, 1024-token contexts = 64 blocks each; cpu capped at
// 2 GiB of fp32 K and V).
func TestNumKVBlocks(t *testing.T) {
	tiny, _ := model.Preset("tiny") // 2 layers x 64 channels: 16 KiB a block
	gpt2, _ := model.Preset("gpt2") // 12 layers x 768 channels: 1,179,648 B a block
	deep := gpt2
	deep.NumLayers = 1000 // 98,304,000 B a block: 2 GiB holds 21, less than one context
	for _, tc := range []struct {
		name, dev  string
		cfg        model.Config
		seqs, kvTk int
		want       int
	}{
		{"explicit tokens round up", "cpu", gpt2, 256, 100, 7},
		{"explicit tokens on cuda", "cuda", gpt2, 256, 1600, 100},
		{"cuda sizes from memory", "cuda", gpt2, 256, 0, 0},
		{"sim full contexts", "sim", gpt2, 256, 0, 256 * 64},
		{"cpu tiny under the cap", "cpu", tiny, 256, 0, 256 * 64},
		{"cpu gpt2 capped at 2 GiB", "cpu", gpt2, 256, 0, 1820},
		{"cpu gpt2 few seqs", "cpu", gpt2, 4, 0, 4 * 64},
		{"cpu keeps one context", "cpu", deep, 256, 0, 64},
	} {
		o := Defaults()
		o.MaxNumSeqs, o.KVCacheTokens = tc.seqs, tc.kvTk
		if got := NumKVBlocks(&o, tc.dev, tc.cfg); got != tc.want {
			t.Errorf("%s: %d blocks, want %d", tc.name, got, tc.want)
		}
	}
}

// countingObserver counts step phases; the engine loop calls it.
type countingObserver struct{ steps atomic.Int64 }

func (c *countingObserver) Begin(p phase.Phase, _ *phase.Batch) {
	if p == phase.Step {
		c.steps.Add(1)
	}
}
func (c *countingObserver) End(phase.Phase, *phase.Batch) {}

// TestStartGenerates starts cpu and sim engines on the built-in model and
// generates a few tokens through each; the hooks see the device and the
// steps.
func TestStartGenerates(t *testing.T) {
	for _, dev := range []string{"cpu", "sim"} {
		t.Run(dev, func(t *testing.T) {
			o := Defaults()
			o.Device, o.SimStep, o.MaxNumSeqs, o.KVCacheTokens = dev, 100*time.Microsecond, 4, 512
			obs := &countingObserver{}
			var gotDev device.Device
			o.Observer = obs
			o.OnDevice = func(d device.Device) { gotDev = d }
			run, err := Start(o, nil)
			if err != nil {
				t.Fatal(err)
			}
			if run.Device != dev || run.KV.NumBlocks != 32 || run.KV.BlockSizeTokens != 16 ||
				run.Model.NumLayers != 2 || run.Tokenizer == nil || run.Name != "built-in tiny" {
				t.Errorf("resolved %q, kv %+v, %d layers, name %q", run.Device, run.KV, run.Model.NumLayers, run.Name)
			}
			if gotDev == nil {
				t.Error("OnDevice was not called")
			}
			n := generate(t, run.Engine, run.Tokenizer.Encode("Hello, my name is"), 5)
			if err := run.Engine.Close(); err != nil {
				t.Fatal(err)
			}
			if n != 5 {
				t.Errorf("%d tokens, want 5", n)
			}
			if obs.steps.Load() == 0 {
				t.Error("the observer saw no step")
			}
		})
	}
}

func generate(t *testing.T, e *engine.Engine, prompt []int32, maxTokens int) int {
	t.Helper()
	st, err := e.Submit(&engine.Request{PromptTokens: prompt, Params: sample.Params{Temperature: 0, TopP: 1},
		HasSeed: true, MaxTokens: maxTokens, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for out := range st.Outputs() {
		if out.Token >= 0 {
			n++
		}
		if out.Finished == engine.FinishError {
			t.Fatal("the device failed")
		}
	}
	return n
}

// TestCUDAUnavailable: without a usable GPU, cuda is a clear error and auto
// falls back to cpu.
func TestCUDAUnavailable(t *testing.T) {
	if cuda.Available() == nil {
		t.Skip("this machine can run the cuda device")
	}
	o := Defaults()
	o.Device = "cuda"
	_, err := Start(o, nil)
	if err == nil || !strings.Contains(err.Error(), "--device cuda is not available on this machine") {
		t.Errorf("cuda on a machine without one: %v", err)
	}
	o.Device = "auto"
	r, err := Resolve(o, nil)
	if err != nil || r.Device != "cpu" {
		t.Errorf("auto resolved to %v (%v), want cpu", r, err)
	}
}

// TestResolveModelDir: a checkpoint directory's tokenizer, or GPT-2's when
// it has no tokenizer files and GPT-2's vocabulary.
func TestResolveModelDir(t *testing.T) {
	tiny, _ := model.Preset("tiny")
	small := tiny
	small.VocabSize, small.EOSTokenID = 1000, 999
	for _, tc := range []struct {
		name    string
		cfg     model.Config
		files   []string // extra (empty) files in the directory
		wantErr string   // "" = resolves
		wantLog string
	}{
		{"no tokenizer, GPT-2 vocabulary", tiny, nil, "", "using GPT-2's"},
		{"no tokenizer, other vocabulary", small, nil, "is not GPT-2's", ""},
		{"broken tokenizer files", tiny, []string{"vocab.json"}, "vocab.json", ""},
		{"broken tokenizer.json", tiny, []string{"tokenizer.json"}, "tokenizer.json", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := model.WriteConfig(filepath.Join(dir, model.ConfigFile), tc.cfg, "float32"); err != nil {
				t.Fatal(err)
			}
			for _, f := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var logs bytes.Buffer
			o := Defaults()
			o.ModelDir, o.Device = dir, "sim"
			r, err := Resolve(o, slog.New(slog.NewTextHandler(&logs, nil)))
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %v, want %q", err, tc.wantErr)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if r.Tokenizer == nil || r.Name != dir || r.Model != tc.cfg || r.Family == nil || r.Family.Name != "gpt2" {
					t.Errorf("resolved %+v", r)
				}
				if !strings.Contains(logs.String(), tc.wantLog) {
					t.Errorf("log %q lacks %q", logs.String(), tc.wantLog)
				}
			}
		})
	}
}

// TestResolveTokenizerJSON: a model directory's tokenizer.json is read
// whatever the family (here Qwen3's files beside a GPT-2-shaped config with
// Qwen's vocabulary size).
func TestResolveTokenizerJSON(t *testing.T) {
	cfg, _ := model.Preset("tiny")
	cfg.VocabSize, cfg.EOSTokenID = 151936, 151645
	dir := t.TempDir()
	if err := model.WriteConfig(filepath.Join(dir, model.ConfigFile), cfg, "float32"); err != nil {
		t.Fatal(err)
	}
	tj, err := qwen3data.TokenizerJSON()
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tokenizer.json": tj, "tokenizer_config.json": qwen3data.TokenizerConfigJSON()} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o := Defaults()
	o.ModelDir, o.Device = dir, "sim"
	r, err := Resolve(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Tokenizer.VocabSize() != 151669 || r.Tokenizer.EOS() != 151645 {
		t.Errorf("tokenizer of %d tokens, EOS %d; want Qwen3's 151669 and 151645", r.Tokenizer.VocabSize(), r.Tokenizer.EOS())
	}
}

// TestBuiltinTokenizerKinds: each family's tokenizer kind has its built-in
// tokenizer, and an unknown kind is an error naming it.
func TestBuiltinTokenizerKinds(t *testing.T) {
	for kind, wantVocab := range map[string]int{"gpt2-bpe": 50257, "qwen2-bpe": 151669} {
		tok, err := BuiltinTokenizer(kind)
		if err != nil || tok.VocabSize() != wantVocab {
			t.Errorf("BuiltinTokenizer(%q): %v, error %v; want %d tokens", kind, tok, err, wantVocab)
		}
	}
	if _, err := BuiltinTokenizer("sentencepiece"); err == nil || !strings.Contains(err.Error(), "sentencepiece") {
		t.Errorf("unknown kind: error %v", err)
	}
}

// TestResolveUnknownModelType: a config.json of a family this build does
// not know names the file and the supported types.
func TestResolveUnknownModelType(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, model.ConfigFile)
	if err := os.WriteFile(path, []byte(`{"model_type":"llama"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	o := Defaults()
	o.ModelDir, o.Device = dir, "sim"
	_, err := Resolve(o, nil)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `model_type "llama" is not supported (supported: [gpt2 qwen3])`) {
		t.Errorf("error %v, want one naming %s and the supported types", err, path)
	}
}

// TestResolveQwen3WithoutTokenizer: a Qwen3 directory without tokenizer
// files gets the built-in Qwen3 tokenizer (151,669 tokens in the model's
// 151,936 rows); a vocabulary that cannot be Qwen3's is a clear error.
func TestResolveQwen3WithoutTokenizer(t *testing.T) {
	c, err := model.Preset("qwen3-tiny")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		vocab   int
		wantErr string
	}{{c.VocabSize, ""}, {151660, "is not Qwen3's"}, {160000, "is not Qwen3's"}} {
		dir := t.TempDir()
		cc := c
		cc.VocabSize = tc.vocab
		if err := model.WriteConfig(filepath.Join(dir, model.ConfigFile), cc, "bfloat16"); err != nil {
			t.Fatal(err)
		}
		o := Defaults()
		o.ModelDir, o.Device = dir, "sim"
		r, err := Resolve(o, nil)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("vocab %d: %v", tc.vocab, err)
		case tc.wantErr == "" && r.Tokenizer.VocabSize() != 151669:
			t.Errorf("vocab %d: tokenizer of %d tokens, want Qwen3's 151,669", tc.vocab, r.Tokenizer.VocabSize())
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("vocab %d: error %v, want one containing %q", tc.vocab, err, tc.wantErr)
		}
	}
}
