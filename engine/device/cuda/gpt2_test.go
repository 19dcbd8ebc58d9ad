package cuda

import (
	"math/rand/v2"
	"testing"

	"github.com/roseinfer/roseinfer/engine/device"
	"github.com/roseinfer/roseinfer/engine/device/cpu"
	"github.com/roseinfer/roseinfer/engine/model"
)

// TestGreedyGPT2VsCPU is issue 4's end-to-end agreement check on the real
// shape: GPT-2 124M as `roseinfer init-model --preset gpt2 --dtype fp16`
// writes it (random weights stored in fp16, read back), 32 prompts, 64
// greedy tokens each, through the CUDA device's default path and through
// the CPU device (the product's fp32 reference path, not the test-only Go
// reference). It reports every first divergence and needs at least 95% of
// tokens to agree before it. Set -short to skip (a minute of CPU work).
func TestGreedyGPT2VsCPU(t *testing.T) {
	if err := Available(); err != nil {
		t.Skipf("no CUDA here: %v", err)
	}
	if testing.Short() {
		t.Skip("-short: the CPU half of this test takes about a minute")
	}
	cfg, err := model.Preset("gpt2")
	if err != nil {
		t.Fatal(err)
	}
	w, err := model.InitRandom(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := model.WriteCheckpoint(dir, cfg, w, model.FP16); err != nil {
		t.Fatal(err)
	}
	if w, err = model.LoadCheckpoint(dir); err != nil {
		t.Fatal(err)
	}
	const P, G = 32, 64
	r := rand.New(rand.NewPCG(24, 25))
	prompts := make([][]int32, P)
	for i := range prompts {
		prompts[i] = randTokens(r, 5+r.IntN(60), cfg.VocabSize)
	}
	kv := device.KVConfig{NumBlocks: 512, BlockSizeTokens: 16}
	gpu := greedyGPU(t, newTestDevice(t, w, Options{}), prompts, G, false)
	cd, err := cpu.New(w, kv, cpu.Options{MaxBatchTokens: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer cd.Close()
	ref := greedyRun(t, cd, kv.BlockSizeTokens, prompts, G, false)
	checkGreedyAgreement(t, prompts, gpu, ref, "the CPU device")
}
