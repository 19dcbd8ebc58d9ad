"""Offline throughput of SGLang (run inside the SGLang environment).

    python sglang_offline.py --job JOB.json [--out RESULT.json]

As the original harness's offline driver did: sglang's Engine with
skip_tokenizer_init (prompts go in as input_ids), the job's attention and
sampling backends, dtype and seed; a greedy warmup of up to 16 prompts; then
one timed generate over every prompt. Output tokens are the sum of
meta_info.completion_tokens. Only run_engine touches SGLang.
"""

import sys
import time

import offline_common as common


def engine_kwargs(job):
    """The sglang Engine keyword arguments for a job."""
    s = job.get("sglang") or {}
    kwargs = {
        "model_path": job["model"],
        "tokenizer_path": job.get("tokenizer") or job["model"],
        "skip_tokenizer_init": True,
        "tp_size": job["tensor_parallel_size"],
        "device": "cuda",
        "random_seed": job["seed"],
        "log_level": "error",
    }
    if s.get("attention_backend"):
        kwargs["attention_backend"] = s["attention_backend"]
    if s.get("sampling_backend"):
        kwargs["sampling_backend"] = s["sampling_backend"]
    if job.get("dtype"):
        kwargs["dtype"] = job["dtype"]
    return kwargs


def timed_sampling(job):
    return {
        "temperature": job["temperature"],
        "top_p": job["top_p"],
        "top_k": job["top_k"],
        "max_new_tokens": job["output_len"],
        "ignore_eos": bool(job["ignore_eos"]),
    }


def warmup_plan(job):
    """(prompts, sampling) of the warmup: the first min(warmup_prompts,
    num_prompts, 16) prompts, greedy, at most 16 new tokens; None when
    skipped."""
    n = min(job["warmup_prompts"], len(job["prompt_token_ids"]), 16)
    if job["skip_warmup"] or n <= 0:
        return None
    sampling = {"temperature": 0.0, "top_p": 1.0, "top_k": 0, "max_new_tokens": min(16, job["output_len"]), "ignore_eos": True}
    return job["prompt_token_ids"][:n], sampling


def count_output_tokens(outputs):
    return sum(int(o["meta_info"]["completion_tokens"]) for o in outputs)


def run_engine(job):
    """Build the engine, warm up, time one generate. The only SGLang calls."""
    import sglang  # noqa: imported in the SGLang env only
    from sglang.srt.entrypoints.engine import Engine

    engine = Engine(**engine_kwargs(job))
    try:
        warm = warmup_plan(job)
        if warm is not None:
            prompts, sampling = warm
            engine.generate(input_ids=prompts, sampling_params=[sampling] * len(prompts))
            time.sleep(0.2)  # let the scheduler settle, as the original
        prompts = job["prompt_token_ids"]
        sampling = [timed_sampling(job)] * len(prompts)
        start = time.perf_counter()
        outputs = engine.generate(input_ids=prompts, sampling_params=sampling)
        total_s = time.perf_counter() - start
    finally:
        engine.shutdown()
    extra = {"library_version": getattr(sglang, "__version__", None)}
    return {"total_s": total_s, "total_output_tokens": count_output_tokens(outputs), "extra": extra}


def main(argv=None):
    return common.run_main(run_engine, argv)


if __name__ == "__main__":
    sys.exit(main())
