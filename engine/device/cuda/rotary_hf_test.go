package cuda

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/roseinfer/roseinfer/engine/model"
)

// TestRotaryGreedyVsHF is issue 34's agreement check on the real shape:
// Qwen3-0.6B as `roseinfer init-model --preset qwen3-0.6b --seed 1` writes it
// (random weights in bf16), 32 prompts, 64 greedy tokens each, on the CUDA
// device against transformers in fp32 (engine/model/testdata/
// make_greedy_qwen3.py, run beside it on the GPU machine: the checkpoint
// is 1.2 GB, so neither it nor the reference is committed).
//   - In the fp32 mode (Options.Float32) at least 99% of tokens must come
//     before their prompt's first divergence.
//   - The bf16 path's agreement is logged; there each divergence must come
//     at a near tie, transformers' two best logits less than bf16NearTie
//     apart. With random weights the two best of 151,936 logits are often
//     closer than bf16 activations resolve (median gap 0.14; docs/cuda.md).
//
// ROSEINFER_QWEN3_DIR names the checkpoint and ROSEINFER_QWEN3_HF_GREEDY
// the script's output; without them the test skips.
func TestRotaryGreedyVsHF(t *testing.T) {
	dir, refPath := os.Getenv("ROSEINFER_QWEN3_DIR"), os.Getenv("ROSEINFER_QWEN3_HF_GREEDY")
	if dir == "" || refPath == "" {
		t.Skip("ROSEINFER_QWEN3_DIR and ROSEINFER_QWEN3_HF_GREEDY name the checkpoint and make_greedy_qwen3.py's output")
	}
	if err := Available(); err != nil {
		t.Skipf("no CUDA here: %v", err)
	}
	raw, err := os.ReadFile(refPath)
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Prompts [][]int32   `json:"prompts"`
		Greedy  [][]int32   `json:"greedy"`
		Gap     [][]float64 `json:"top2_gap"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatalf("%s: %v", refPath, err)
	}
	if len(ref.Prompts) == 0 || len(ref.Greedy) != len(ref.Prompts) || len(ref.Gap) != len(ref.Prompts) {
		t.Fatalf("%s: %d prompts, %d continuations, %d gap lists", refPath, len(ref.Prompts), len(ref.Greedy), len(ref.Gap))
	}
	w, err := model.LoadCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	G := len(ref.Greedy[0])
	for _, f32 := range []bool{false, true} {
		t.Run(fmt.Sprintf("float32=%v", f32), func(t *testing.T) {
			d := newTestDevice(t, w, Options{MaxStepTokens: 4096, MaxSeqs: 64, Float32: f32})
			gpu := greedyGPU(t, d, ref.Prompts, G, false)
			for i := range ref.Prompts {
				for k := range G {
					if gpu[i][k] == ref.Greedy[i][k] {
						continue
					}
					gap := ref.Gap[i][k]
					t.Logf("prompt %d: first divergence at token %d (HF's top-2 logit gap there %.4f)", i, k, gap)
					if !f32 && gap >= bf16NearTie {
						t.Errorf("prompt %d: bf16 diverged at token %d where HF's two best logits are %.4f apart (>= %.2f)", i, k, gap, bf16NearTie)
					}
					break
				}
			}
			if f32 {
				checkGreedyAgreementMin(t, ref.Prompts, gpu, ref.Greedy, "transformers fp32", 0.99)
			} else {
				checkGreedyAgreementMin(t, ref.Prompts, gpu, ref.Greedy, "transformers fp32", 0)
			}
		})
	}
}

// bf16NearTie is the largest gap between transformers' two best logits at
// which the bf16 path may pick the other token: its logits are within
// rotaryLogitsBound (relative) of fp32's, a few thousandths of a logit of
// about 0.6 (divergences measured at gaps of 0.0003 to 0.0088).
const bf16NearTie = 0.05
