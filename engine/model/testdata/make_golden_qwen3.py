#!/usr/bin/env python3
"""Reference logits and greedy continuations of a Qwen3 model from Hugging Face transformers.

The independent source for the CPU device's Qwen3 golden test
(engine/device/cpu/qwen3_golden_test.go). It loads a checkpoint directory
written by `roseinfer init-model --preset qwen3-tiny --seed 1 --dtype fp32`
with transformers' Qwen3ForCausalLM in fp32 (eval mode, no network, eager
attention, on the CPU so no TF32 path can touch the matmuls), feeds the
prompts of qwen3_golden_prompts.json as token ids (no tokenizer), and writes:

  qwen3_golden.json        index: versions, loading info, the model's config
                           as transformers read it, for each logits row its
                           prompt/position and its offset and length (V) in
                           floats, greedy continuations
  qwen3_golden_logits.bin  the rows, little-endian float32, back to back

How the committed fixture is made (the Go side writes the checkpoint, the
GPU machine, which has torch and transformers, runs this script):

  go run ./cmd/roseinfer init-model --preset qwen3-tiny --seed 1 --dtype fp32 --out .gpu/qwen3-tiny
  python3 engine/model/testdata/make_golden_qwen3.py --model .gpu/qwen3-tiny \
      --prompts engine/model/testdata/qwen3_golden_prompts.json --out $OUT/qwen3
  cp $OUT/qwen3/qwen3_golden.json $OUT/qwen3/qwen3_golden_logits.bin engine/model/testdata/

Greedy continuations are computed by full recomputation (no KV cache) and
torch.argmax, which returns the first maximum: ties go to the lowest id, as in
the Go sampler.
"""

import argparse
import json
import os
import platform
import struct
import sys
import traceback


def load_model(path, torch, Qwen3ForCausalLM):
    """Load a checkpoint directory as an fp32 Qwen3ForCausalLM."""
    attempts = [  # newest transformers first; record which one worked
        dict(dtype=torch.float32, local_files_only=True, output_loading_info=True, attn_implementation="eager"),
        dict(torch_dtype=torch.float32, local_files_only=True, output_loading_info=True, attn_implementation="eager"),
        dict(local_files_only=True, output_loading_info=True),
    ]
    failures = []
    for kwargs in attempts:
        try:
            res = Qwen3ForCausalLM.from_pretrained(path, **kwargs)
            break
        except TypeError:
            failures.append(traceback.format_exc(limit=2))
    else:
        raise RuntimeError("from_pretrained failed: %s" % failures)
    model, info = res if isinstance(res, tuple) else (res, {})
    model = model.float().eval()
    info = {str(k): sorted(str(x) for x in v) if isinstance(v, (list, tuple, set)) else str(v) for k, v in dict(info).items()}
    # lm_head.weight is tied to embed_tokens and not stored.
    missing = [k for k in info.get("missing_keys", []) if k != "lm_head.weight"]
    bad = missing + [k for key in ("unexpected_keys", "mismatched_keys", "error_msgs") for k in info.get(key, []) if isinstance(info.get(key), list)]
    emb, head = model.model.embed_tokens.weight, model.lm_head.weight
    tied = head.data_ptr() == emb.data_ptr() or bool(torch.equal(head, emb))
    if bad or not tied:
        raise RuntimeError("checkpoint %s did not load cleanly: problems %s, lm_head tied %s, info %s" % (path, bad, tied, info))
    used = {k: str(v) for k, v in kwargs.items()}
    return model, {"info": info, "lm_head_tied": tied, "kwargs": used, "failed_attempts": failures}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="checkpoint directory written by roseinfer init-model")
    ap.add_argument("--prompts", required=True, help="qwen3_golden_prompts.json")
    ap.add_argument("--out", required=True, help="output directory")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    index = {"rows": [], "greedy": {}, "loading": {}, "errors": []}
    floats = []  # all rows, concatenated

    def save():
        with open(os.path.join(args.out, "qwen3_golden_logits.bin"), "wb") as f:
            f.write(struct.pack("<%df" % len(floats), *floats))
        with open(os.path.join(args.out, "qwen3_golden.json"), "w") as f:
            json.dump(index, f, indent=1)
            f.write("\n")

    try:
        import torch
        import transformers
        from transformers import Qwen3ForCausalLM

        torch.set_grad_enabled(False)
        torch.manual_seed(0)
        index["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__, "python": platform.python_version()}
        with open(args.prompts) as f:
            spec = json.load(f)
        index["preset"], index["seed"] = spec["preset"], spec["seed"]

        model, load_info = load_model(args.model, torch, Qwen3ForCausalLM)
        index["loading"] = load_info
        cfg = model.config
        keys = ("num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_size",
                "intermediate_size", "max_position_embeddings", "vocab_size", "rms_norm_eps", "rope_theta",
                "rope_scaling", "rope_parameters", "hidden_act", "tie_word_embeddings", "attention_bias")
        index["config"] = {k: str(getattr(cfg, k, None)) for k in keys}
        index["attn_implementation"] = str(getattr(cfg, "_attn_implementation", None))

        for p in spec["prompts"]:
            ids = torch.tensor([p["ids"]], dtype=torch.long)
            logits = model(input_ids=ids).logits[0].float()
            for pos in p["logit_positions"]:
                values = [float(x) for x in logits[pos].tolist()]
                index["rows"].append({"prompt": p["name"], "position": pos, "offset": len(floats), "length": len(values)})
                floats.extend(values)
            seq = list(p["ids"])
            for _ in range(spec["greedy_tokens"]):
                # Full recomputation, LM head on the last position only.
                hidden = model.model(input_ids=torch.tensor([seq], dtype=torch.long)).last_hidden_state[0, -1]
                seq.append(int(torch.argmax(model.lm_head(hidden)).item()))
            index["greedy"][p["name"]] = seq[len(p["ids"]):]
            save()
    except Exception:
        index["errors"].append(traceback.format_exc())
        save()
        print(traceback.format_exc(), file=sys.stderr)
        return 1
    save()
    print(json.dumps({k: v for k, v in index.items() if k != "rows"}, indent=1)[:6000])
    print("rows:", len(index["rows"]), "floats:", len(floats), "errors:", len(index["errors"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
