"""What the offline drivers share: the job file, the result line, main().

A driver (vllm_offline.py, sglang_offline.py, trtllm_offline.py) runs inside
its backend's environment as `python DRIVER --job JOB.json --out RESULT.json`.
The job holds the exact prompt token ids (the same for every backend) and the
sampling settings; the driver builds the engine, warms it up, times one
batched generate call over all prompts and prints ONE JSON line with the
offline result fields of results/schema.go (OfflineResult), also written to
--out. Everything here is standard library only, so argument parsing and the
JSON output are tested without vLLM, SGLang or TensorRT-LLM installed
(test_offline_drivers.py); each driver keeps its library calls in a single
function, run_engine(job).
"""

import argparse
import json
import platform
import sys
import traceback

# Denominators are floored like the original's (D.3).
MIN_DURATION_S = 1e-9

REQUIRED_KEYS = ("backend", "model", "prompt_token_ids", "output_len")

DEFAULTS = {
    "tokenizer": None,
    "dtype": None,  # None: the library's "auto"
    "temperature": 0.7,
    "top_p": 0.9,
    "top_k": 50,
    "ignore_eos": True,
    "seed": 42,
    "tensor_parallel_size": 1,
    "max_batch_size": 256,
    "warmup_prompts": 8,
    "skip_warmup": False,
    "vllm": {},
    "sglang": {},
    "trtllm": {},
}


class JobError(ValueError):
    """The job file is not a valid job."""


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description="Offline throughput driver (one JSON result line on stdout).")
    parser.add_argument("--job", required=True, help="job JSON written by bench offline")
    parser.add_argument("--out", default=None, help="also write the result JSON here")
    return parser.parse_args(argv)


def validate_job(job):
    """Fill defaults and check types; returns a new dict."""
    if not isinstance(job, dict):
        raise JobError("job must be a JSON object")
    for key in REQUIRED_KEYS:
        if key not in job:
            raise JobError("job lacks %r" % key)
    out = dict(DEFAULTS)
    out.update(job)
    prompts = out["prompt_token_ids"]
    if not isinstance(prompts, list) or not prompts:
        raise JobError("prompt_token_ids must be a non-empty list of token-id lists")
    for i, ids in enumerate(prompts):
        if not isinstance(ids, list) or not ids or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in ids):
            raise JobError("prompt_token_ids[%d] must be a non-empty list of non-negative ints" % i)
    if not isinstance(out["output_len"], int) or out["output_len"] < 1:
        raise JobError("output_len must be a positive int")
    for key in ("vllm", "sglang", "trtllm"):
        if out[key] is None:
            out[key] = {}
        if not isinstance(out[key], dict):
            raise JobError("%s must be an object" % key)
    return out


def load_job(path):
    with open(path, "r", encoding="utf-8") as f:
        try:
            job = json.load(f)
        except ValueError as exc:
            raise JobError("job %s is not JSON: %s" % (path, exc))
    return validate_job(job)


def input_lengths(job):
    """(num_prompts, input_len, total_input_tokens); input_len is the
    common length when every prompt has it, else the mean rounded down."""
    lengths = [len(ids) for ids in job["prompt_token_ids"]]
    total = sum(lengths)
    return len(lengths), total // len(lengths), total


def make_result(job, total_s, total_output_tokens, extra=None, device="cuda"):
    """The OfflineResult fields. prefill_s/decode_s are null: one generate
    call cannot be split. The Go side recomputes the throughputs from the
    counts with harness/metrics; they are here so the line stands alone."""
    num_prompts, input_len, total_input = input_lengths(job)
    d = max(float(total_s), MIN_DURATION_S)
    merged = {"python_executable": sys.executable, "python_version": platform.python_version()}
    merged.update(extra or {})
    return {
        "backend": job["backend"],
        "model": job["model"],
        "device": device,
        "num_prompts": num_prompts,
        "input_len": input_len,
        "output_len": job["output_len"],
        "total_input_tokens": total_input,
        "total_output_tokens": int(total_output_tokens),
        "prefill_s": None,
        "decode_s": None,
        "total_s": float(total_s),
        "request_throughput_rps": num_prompts / d,
        "output_throughput_tps": total_output_tokens / d,
        "total_throughput_tps": (total_input + total_output_tokens) / d,
        "extra": merged,
    }


def error_result(job, exc):
    """A zeroed result naming the failure (written to --out on exceptions)."""
    base = job if isinstance(job, dict) else {}
    safe = {
        "backend": base.get("backend", "?"),
        "model": base.get("model", "?"),
        "prompt_token_ids": base.get("prompt_token_ids") or [[0]],
        "output_len": base.get("output_len", 0),
    }
    try:
        result = make_result(safe, 0.0, 0)
    except Exception:
        result = {"backend": safe["backend"], "model": safe["model"], "extra": {}}
    message = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    result["request_throughput_rps"] = result["output_throughput_tps"] = result["total_throughput_tps"] = 0.0
    result["extra"]["error"] = message
    result["extra"]["error_type"] = type(exc).__name__
    return result


def emit(result, out_path=None, stdout=None):
    line = json.dumps(result, sort_keys=True, allow_nan=False)
    if out_path:
        with open(out_path, "w", encoding="utf-8") as f:
            f.write(line + "\n")
    stream = stdout if stdout is not None else sys.stdout
    stream.flush()
    stream.write(line + "\n")
    stream.flush()


def run_main(run_engine, argv=None, stdout=None):
    """Parse arguments, load the job, call run_engine(job) -> {"total_s",
    "total_output_tokens", "extra"} and emit the result. A failure prints
    its traceback on stderr, writes an error result to --out and returns 1;
    a bad job returns 2."""
    args = parse_args(argv)
    try:
        job = load_job(args.job)
    except (OSError, JobError) as exc:
        sys.stderr.write("bad job: %s\n" % exc)
        return 2
    try:
        run = run_engine(job)
        result = make_result(job, run["total_s"], run["total_output_tokens"], run.get("extra"))
    except BaseException as exc:  # native errors surface as many types
        traceback.print_exc()
        sys.stderr.flush()
        if args.out:
            emit(error_result(job, exc), args.out, stdout=sys.stderr)
        if isinstance(exc, KeyboardInterrupt):
            return 130
        return 1
    emit(result, args.out, stdout)
    return 0
