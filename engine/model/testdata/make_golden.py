#!/usr/bin/env python3
"""Reference logits and greedy continuations from Hugging Face transformers.

The independent source for the CPU device's golden test
(engine/device/cpu/golden_test.go). It loads checkpoint directories written by
Go's model.WriteCheckpoint -- the models of golden_prompts.json (the `tiny`
preset in fp32, and a small multi-head model in fp32, fp16 and bf16) with the
seeds given there -- with transformers' GPT2LMHeadModel in fp32 (eval mode, no network, eager attention, on the CPU so
no TF32 path can touch the matmuls), feeds the prompts as token ids (no
tokenizer), and writes:

  golden.json        index: versions, loading info, for each logits row its
                     model/checkpoint/prompt/position and its offset and
                     length (V) in floats, greedy continuations
  golden_logits.bin  the rows, little-endian float32, back to back

How the committed fixture was made (the Go side writes the checkpoints, the
GPU machine, which has torch and transformers, runs this script):

  go test ./engine/model -run TestWriteGoldenCheckpoints -golden-dir=$PWD/.gpu/golden
  cp engine/model/testdata/make_golden.py engine/model/testdata/golden_prompts.json .gpu/golden/
  python3 .gpu/golden/make_golden.py --dir .gpu/golden --out $OUT/golden
  cp $OUT/golden/golden.json $OUT/golden/golden_logits.bin engine/model/testdata/

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


def load_model(path, torch, GPT2LMHeadModel):
    """Load a checkpoint directory as an fp32 GPT2LMHeadModel."""
    attempts = [  # newest transformers first; record which one worked
        dict(dtype=torch.float32, local_files_only=True, output_loading_info=True, attn_implementation="eager"),
        dict(torch_dtype=torch.float32, local_files_only=True, output_loading_info=True, attn_implementation="eager"),
        dict(local_files_only=True, output_loading_info=True),
        dict(local_files_only=True),
    ]
    failures = []
    for kwargs in attempts:
        try:
            res = GPT2LMHeadModel.from_pretrained(path, **kwargs)
            break
        except TypeError:
            failures.append(traceback.format_exc(limit=2))
    else:
        raise RuntimeError("from_pretrained failed: %s" % failures)
    model, info = res if isinstance(res, tuple) else (res, {})
    model = model.float().eval()  # an upcast of fp16/bf16 weights is exact
    info = {str(k): sorted(str(x) for x in v) if isinstance(v, (list, tuple, set)) else str(v) for k, v in dict(info).items()}
    # lm_head.weight is tied to wte; the causal-mask buffers are not weights.
    missing = [k for k in info.get("missing_keys", []) if k != "lm_head.weight" and not k.endswith((".attn.bias", ".attn.masked_bias"))]
    bad = missing + [k for key in ("unexpected_keys", "mismatched_keys", "error_msgs") for k in info.get(key, []) if isinstance(info.get(key), list)]
    wte, head = model.transformer.wte.weight, model.lm_head.weight
    tied = head.data_ptr() == wte.data_ptr() or bool(torch.equal(head, wte))
    used = {k: str(v) for k, v in kwargs.items()}
    return model, {"info": info, "problems": bad, "lm_head_tied": tied, "kwargs": used, "failed_attempts": failures}


def load_checked(path, torch, GPT2LMHeadModel):
    """load_model, and if the names were not recognised, retry once with the
    tensors renamed to GPT2LMHeadModel's own "transformer." keys (recorded, so
    that a failure of the Go writer's naming is visible in golden.json)."""
    model, info = load_model(path, torch, GPT2LMHeadModel)
    if not info["problems"] and info["lm_head_tied"]:
        return model, info
    import shutil
    import tempfile
    from safetensors.torch import load_file, save_file

    tmp = tempfile.mkdtemp()
    sd = load_file(os.path.join(path, "model.safetensors"))
    save_file({"transformer." + k: v for k, v in sd.items()}, os.path.join(tmp, "model.safetensors"), metadata={"format": "pt"})
    shutil.copy(os.path.join(path, "config.json"), tmp)
    model2, info2 = load_model(tmp, torch, GPT2LMHeadModel)
    info["fallback_prefixed"] = info2
    if info2["problems"] or not info2["lm_head_tied"]:
        raise RuntimeError("checkpoint %s did not load cleanly: %s" % (path, info))
    return model2, info


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True, help="directory with golden_prompts.json and the <model>-<dtype>/ checkpoints")
    ap.add_argument("--out", required=True, help="output directory")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    index = {"rows": [], "greedy": {}, "loading": {}, "errors": []}
    floats = []  # all rows, concatenated

    def save():
        with open(os.path.join(args.out, "golden_logits.bin"), "wb") as f:
            f.write(struct.pack("<%df" % len(floats), *floats))
        with open(os.path.join(args.out, "golden.json"), "w") as f:
            json.dump(index, f, indent=1)
            f.write("\n")

    try:
        import torch
        import transformers
        from transformers import GPT2LMHeadModel

        torch.set_grad_enabled(False)
        torch.manual_seed(0)
        index["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__, "python": platform.python_version()}
        with open(os.path.join(args.dir, "golden_prompts.json")) as f:
            spec = json.load(f)

        def add_row(model_name, ckpt, prompt, pos, logits_row):
            values = [float(x) for x in logits_row.tolist()]
            index["rows"].append({"model": model_name, "checkpoint": ckpt, "prompt": prompt, "position": pos,
                                  "offset": len(floats), "length": len(values)})
            floats.extend(values)

        for spec_model in spec["models"]:
            name = spec_model["name"]
            model, load_info = load_checked(os.path.join(args.dir, name + "-fp32"), torch, GPT2LMHeadModel)
            index["loading"][name + "-fp32"] = load_info
            index.setdefault("configs", {})[name] = {k: getattr(model.config, k) for k in ("n_layer", "n_head", "n_embd", "n_positions", "vocab_size", "layer_norm_epsilon", "activation_function")}
            prompts = {p["name"]: p for p in spec_model["prompts"]}
            for p in spec_model["prompts"]:
                ids = torch.tensor([p["ids"]], dtype=torch.long)
                logits = model(input_ids=ids).logits[0].float()
                for pos in p["logit_positions"]:
                    add_row(name, "fp32", p["name"], pos, logits[pos])
                seq = list(p["ids"])
                for _ in range(spec["greedy_tokens"]):
                    # Full recomputation, LM head on the last position only.
                    hidden = model.transformer(input_ids=torch.tensor([seq], dtype=torch.long)).last_hidden_state[0, -1]
                    seq.append(int(torch.argmax(model.lm_head(hidden)).item()))
                index["greedy"].setdefault(name, {})[p["name"]] = seq[len(p["ids"]):]
                save()

            check = spec_model.get("dtype_checks")
            for dt in ("fp16", "bf16") if check else ():
                try:
                    m, info = load_checked(os.path.join(args.dir, name + "-" + dt), torch, GPT2LMHeadModel)
                    index["loading"][name + "-" + dt] = info
                    ids = torch.tensor([prompts[check["prompt"]]["ids"]], dtype=torch.long)
                    add_row(name, dt, check["prompt"], check["position"], m(input_ids=ids).logits[0, check["position"]].float())
                except Exception:
                    index["errors"].append(name + "-" + dt + ": " + traceback.format_exc())
                save()
    except Exception:
        index["errors"].append(traceback.format_exc())
        save()
        print(traceback.format_exc(), file=sys.stderr)
        return 1
    save()
    print(json.dumps({k: v for k, v in index.items() if k not in ("rows",)}, indent=1)[:6000])
    print("rows:", len(index["rows"]), "floats:", len(floats), "errors:", len(index["errors"]))
    return 1 if index["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
