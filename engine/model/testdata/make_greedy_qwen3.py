#!/usr/bin/env python3
"""Greedy continuations of a Qwen3 checkpoint from Hugging Face transformers in fp32.

The independent reference of the CUDA device's TestRotaryGreedyVsHF
(engine/device/cuda/rotary_hf_test.go): a checkpoint written by
`roseinfer init-model --preset qwen3-0.6b --seed 1` (bf16 weights) is loaded
with Qwen3ForCausalLM and run in fp32 (eager attention, TF32 off), and for
--prompts seeded random prompts of 5 to 64 regular token ids (below
151,643, the first special id) the script writes --tokens greedy tokens
each, computed with the KV cache one token at a time, and at every step the
gap between the largest and the second largest logit (a divergence at a
near tie says little).

  roseinfer init-model --preset qwen3-0.6b --seed 1 --out /tmp/q06
  python3 engine/model/testdata/make_greedy_qwen3.py --model /tmp/q06 --out /tmp/q06_greedy.json
  ROSEINFER_QWEN3_DIR=/tmp/q06 ROSEINFER_QWEN3_HF_GREEDY=/tmp/q06_greedy.json \\
      .gpu/cuda.test -test.run TestRotaryGreedyVsHF -test.v

The 0.6B checkpoint is 1.2 GB, so neither it nor the output is committed:
both are made again on the GPU machine (the seeds fix them); `make gpu-test`
(engine/device/cuda/gpu_check.sh) does so wherever transformers imports.
"""
import argparse
import json
import platform
import random
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()

    import torch
    import transformers
    from transformers import Qwen3ForCausalLM

    torch.set_grad_enabled(False)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    model = Qwen3ForCausalLM.from_pretrained(args.model, dtype=torch.float32, local_files_only=True,
                                             attn_implementation="eager").to(dev).eval()
    rng = random.Random(args.seed)
    prompts = [[rng.randrange(151643) for _ in range(rng.randint(5, 64))] for _ in range(args.prompts)]
    greedy, margins = [], []
    start = time.time()
    for ids in prompts:
        out = model(input_ids=torch.tensor([ids], device=dev), use_cache=True)
        past, logits = out.past_key_values, out.logits[0, -1]
        toks, gaps = [], []
        for _ in range(args.tokens):
            top = torch.topk(logits.float(), 2)
            tok = int(top.indices[0])
            toks.append(tok)
            gaps.append(float(top.values[0] - top.values[1]))
            out = model(input_ids=torch.tensor([[tok]], device=dev), past_key_values=past, use_cache=True)
            past, logits = out.past_key_values, out.logits[0, -1]
        greedy.append(toks)
        margins.append(gaps)
    result = {
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "python": platform.python_version()},
        "device": torch.cuda.get_device_name(0) if dev == "cuda" else "cpu",
        "model": args.model, "seed": args.seed, "dtype": "float32",
        "prompts": prompts, "greedy": greedy, "top2_gap": margins,
    }
    with open(args.out, "w") as f:
        json.dump(result, f)
    print("wrote %s: %d prompts x %d tokens in %.1f s on %s" % (args.out, len(prompts), args.tokens, time.time() - start, result["device"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
