"""Offline throughput of vLLM (run inside the vLLM environment).

    python vllm_offline.py --job JOB.json [--out RESULT.json]

As the original harness's offline driver did: vllm.LLM with the job's
dtype, tensor parallel size, attention backend, max_num_seqs and async
scheduling; unsupported keyword arguments are dropped and recorded; a one-token
greedy warmup; then one timed generate over every prompt as token ids with
SamplingParams(ignore_eos, detokenize=False). Output tokens are the lengths
of the returned token ids. Only run_engine touches vLLM.
"""

import itertools
import sys
import time

import offline_common as common

# Keyword arguments an older or newer vLLM may not accept, in the order the
# original tried dropping them.
OPTIONAL_KWARGS = ("max_model_len", "attention_backend", "async_scheduling")


def llm_kwargs(job, model_max_len=None):
    """The vllm.LLM keyword arguments for a job."""
    v = job.get("vllm") or {}
    kwargs = {
        "model": job["model"],
        "tensor_parallel_size": job["tensor_parallel_size"],
        "trust_remote_code": True,
        "async_scheduling": bool(v.get("async_scheduling", True)),
    }
    if job.get("tokenizer"):
        kwargs["tokenizer"] = job["tokenizer"]
    if job.get("dtype"):
        kwargs["dtype"] = job["dtype"]
    # Long-context models get a small max_model_len so the KV pool is not
    # sized for 8k+ tokens per sequence (the original did this too).
    if model_max_len is not None and model_max_len >= 8192:
        lengths = [len(ids) for ids in job["prompt_token_ids"]]
        kwargs["max_model_len"] = max(16, max(lengths) + job["output_len"] + 8)
    if v.get("attention_backend"):
        kwargs["attention_backend"] = v["attention_backend"]
    if v.get("max_num_seqs"):
        kwargs["max_num_seqs"] = int(v["max_num_seqs"])
    return kwargs


def top_k(value):
    """vLLM disables top-k with -1; the harness's 0 means the same."""
    return -1 if value is None or value <= 0 else int(value)


def timed_sampling(job):
    return {
        "max_tokens": job["output_len"],
        "temperature": job["temperature"],
        "top_p": job["top_p"],
        "top_k": top_k(job["top_k"]),
        "ignore_eos": bool(job["ignore_eos"]),
        "detokenize": False,
    }


def warmup_sampling():
    return {"max_tokens": 1, "temperature": 0.0, "top_k": -1, "ignore_eos": True, "detokenize": False}


def build_llm(llm_class, kwargs):
    """Construct llm_class(**kwargs), dropping optional keyword arguments the
    installed version rejects with TypeError (fewest dropped first). Returns
    (llm, {name + "_supported": bool})."""
    optional = [k for k in OPTIONAL_KWARGS if k in kwargs]
    last_error = None
    for n in range(len(optional) + 1):
        for dropped in itertools.combinations(optional, n):
            trial = {k: v for k, v in kwargs.items() if k not in dropped}
            try:
                llm = llm_class(**trial)
            except TypeError as exc:
                last_error = exc
                continue
            return llm, {k + "_supported": k not in dropped for k in optional}
    raise last_error


def run_engine(job):
    """Build the engine, warm up, time one generate. The only vLLM calls."""
    from vllm import LLM, SamplingParams  # noqa: imported in the vLLM env only
    import vllm

    model_max_len = None
    try:
        from transformers import AutoConfig

        cfg = AutoConfig.from_pretrained(job["model"], trust_remote_code=True)
        model_max_len = getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None)
    except Exception:
        pass
    kwargs = llm_kwargs(job, model_max_len)
    llm, supported = build_llm(LLM, kwargs)
    prompts = [{"prompt_token_ids": ids} for ids in job["prompt_token_ids"]]
    if not job["skip_warmup"]:
        llm.generate(prompts[:1], SamplingParams(**warmup_sampling()), use_tqdm=False)
    params = SamplingParams(**timed_sampling(job))
    start = time.perf_counter()
    outputs = llm.generate(prompts, params, use_tqdm=False)
    total_s = time.perf_counter() - start
    total_output = sum(len(o.outputs[0].token_ids) for o in outputs)
    v = job.get("vllm") or {}
    extra = {
        "library_version": getattr(vllm, "__version__", None),
        "async_scheduling": kwargs["async_scheduling"],
        "attention_backend": v.get("attention_backend"),
        "max_num_seqs": v.get("max_num_seqs"),
    }
    extra.update(supported)
    return {"total_s": total_s, "total_output_tokens": total_output, "extra": extra}


def main(argv=None):
    return common.run_main(run_engine, argv)


if __name__ == "__main__":
    sys.exit(main())
