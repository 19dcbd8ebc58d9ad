package offline

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/roseinfer/roseinfer/engine/device/cuda"
	"github.com/roseinfer/roseinfer/results"
)

func TestRandomPromptsExactAndReproducible(t *testing.T) {
	a := RandomPrompts(3, 7, 50257, 42)
	b := RandomPrompts(3, 7, 50257, 42)
	c := RandomPrompts(3, 7, 50257, 43)
	same := true
	for i := range a {
		if len(a[i]) != 7 {
			t.Fatalf("prompt %d has %d tokens", i, len(a[i]))
		}
		for j := range a[i] {
			if a[i][j] != b[i][j] {
				t.Fatalf("same seed, different prompts")
			}
			if a[i][j] < 0 || a[i][j] >= 50257 {
				t.Fatalf("token %d out of range", a[i][j])
			}
			same = same && a[i][j] == c[i][j]
		}
	}
	if same {
		t.Error("different seeds gave the same prompts")
	}
}

// inProcess runs only the in-process backend on the given device.
func inProcess(t *testing.T, device string, numPrompts, inputLen, outputLen int) *results.Offline {
	t.Helper()
	o := Default()
	o.Backends = []string{LabelInProcess}
	o.Device = device
	o.SimStep = 200 * time.Microsecond
	o.NumPrompts, o.InputLen, o.OutputLen = numPrompts, inputLen, outputLen
	o.WarmupPrompts = 2
	o.RunDir = t.TempDir()
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Failures) != 0 {
		t.Fatalf("failures: %v", rep.Failures)
	}
	off, err := results.LoadOffline(rep.ResultsPath)
	if err != nil {
		t.Fatal(err)
	}
	return off
}

func checkTotals(t *testing.T, off *results.Offline, numPrompts, inputLen, outputLen int) {
	t.Helper()
	if len(off.Results) != 1 {
		t.Fatalf("%d results", len(off.Results))
	}
	r := off.Results[0]
	if r.TotalInputTokens != numPrompts*inputLen || r.TotalOutputTokens != numPrompts*outputLen {
		t.Errorf("totals in %d out %d, want exactly %d and %d", r.TotalInputTokens, r.TotalOutputTokens,
			numPrompts*inputLen, numPrompts*outputLen)
	}
	if !(r.TotalS > 0) || r.PrefillS == nil || r.DecodeS == nil || *r.PrefillS < 0 || *r.PrefillS > r.TotalS {
		t.Errorf("timing total %v prefill %v decode %v", r.TotalS, r.PrefillS, r.DecodeS)
	}
	wantRPS := float64(numPrompts) / r.TotalS
	if d := r.RequestThroughputRPS - wantRPS; d > 1e-9*wantRPS || d < -1e-9*wantRPS {
		t.Errorf("req/s %v, want %v", r.RequestThroughputRPS, wantRPS)
	}
}

func TestInProcessSimTotalsExact(t *testing.T) {
	off := inProcess(t, "sim", 6, 40, 9)
	checkTotals(t, off, 6, 40, 9)
}

// The acceptance case, kept small: the CPU default (tiny model) with
// --input-len 256 gives totals equal to prompts × lengths exactly. The KV
// pool holds all 3 sequences of 260 tokens: 17 blocks of 16 each, plus one
// to spare = 54 blocks.
func TestInProcessCPUInputLen256(t *testing.T) {
	off := inProcess(t, "cpu", 3, 256, 4)
	checkTotals(t, off, 3, 256, 4)
	r := off.Results[0]
	if r.Device != "cpu" || r.Extra["kv_blocks"] != 54.0 || r.Extra["overlap_schedule"] != true {
		t.Errorf("device %q, extra %v; want cpu, kv_blocks 54, overlap_schedule true", r.Device, r.Extra)
	}
}

// --device auto runs in-process on what launch picks (cpu here, cuda on a
// GPU machine) and records that device; --device cuda without a GPU is a
// failed backend with the reason.
func TestInProcessAutoAndCUDA(t *testing.T) {
	off := inProcess(t, "auto", 2, 16, 3)
	checkTotals(t, off, 2, 16, 3)
	want := "cpu"
	if cuda.Available() == nil {
		want = "cuda"
	}
	if got := off.Results[0].Device; got != want {
		t.Errorf("auto ran on %q, want %q", got, want)
	}
	if want == "cuda" {
		return
	}
	o := Default()
	o.Backends, o.Device, o.RunDir = []string{LabelInProcess}, "cuda", t.TempDir()
	o.NumPrompts, o.InputLen, o.OutputLen = 1, 8, 1
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Failures) != 1 || !strings.Contains(rep.Failures[0], "--device cuda is not available") {
		t.Errorf("failures %q, want cuda's unavailability", rep.Failures)
	}
}

func TestValidate(t *testing.T) {
	for _, mod := range []func(*Options){
		func(o *Options) { o.Backends = nil },
		func(o *Options) { o.NumPrompts = 0 },
		func(o *Options) { o.InputLen = 1000; o.OutputLen = 100 },
		func(o *Options) { o.MaxBatchSize = 0 },
		func(o *Options) { o.Device = "tpu" },
	} {
		o := Default()
		mod(&o)
		if err := o.validate(); err == nil {
			t.Errorf("invalid options accepted: %+v", o)
		}
	}
}
