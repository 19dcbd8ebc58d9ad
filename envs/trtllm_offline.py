"""Offline throughput of TensorRT-LLM (run inside the TensorRT-LLM environment).

    python trtllm_offline.py --job JOB.json [--out RESULT.json]

As the original harness's offline driver did: LLM arguments from
tensorrt_llm.commands.serve.get_llm_args with max_batch_size, max_num_tokens =
max_batch_size * max_seq_len and max_seq_len = max(16, in + out + 8);
skip_tokenizer_init and dtype; the TensorRT backend (the default: GPT-2 has no
PyTorch-backend model) uses tensorrt_llm._tensorrt_engine.LLM, the PyTorch
backend tensorrt_llm.LLM. A one-token greedy warmup, then one timed generate
with SamplingParams(end_id, pad_id, ignore_eos, detokenize=False). Output
tokens are the lengths of the returned token ids. Only run_engine touches
TensorRT-LLM.
"""

import sys
import time

import offline_common as common

TENSORRT_BACKENDS = ("tensorrt", "trt")


def backend_name(job):
    return (job.get("trtllm") or {}).get("backend") or "tensorrt"


def llm_arg_request(job):
    """The keyword arguments given to get_llm_args."""
    lengths = [len(ids) for ids in job["prompt_token_ids"]]
    max_seq_len = max(16, max(lengths) + job["output_len"] + 8)
    return {
        "model": job["model"],
        "tokenizer": None,
        "backend": backend_name(job),
        "max_batch_size": job["max_batch_size"],
        "max_num_tokens": job["max_batch_size"] * max_seq_len,
        "max_seq_len": max_seq_len,
        "tensor_parallel_size": job["tensor_parallel_size"],
        "trust_remote_code": True,
    }


def finish_llm_args(job, llm_args):
    """Our additions to get_llm_args' result; the TensorRT engine class takes
    no backend argument."""
    args = dict(llm_args)
    args["skip_tokenizer_init"] = True
    if job.get("dtype"):
        args["dtype"] = job["dtype"]
    if backend_name(job) in TENSORRT_BACKENDS:
        args.pop("backend", None)
    return args


def top_k(value):
    """TensorRT-LLM turns top-k off with None."""
    return None if value is None or value <= 0 else int(value)


def timed_sampling(job, end_id, pad_id):
    return {
        "end_id": end_id,
        "pad_id": pad_id,
        "max_tokens": job["output_len"],
        "temperature": job["temperature"],
        "top_p": job["top_p"],
        "top_k": top_k(job["top_k"]),
        "ignore_eos": bool(job["ignore_eos"]),
        "detokenize": False,
    }


def special_ids(tokenizer, vocab_size):
    """(end_id, pad_id) from the tokenizer; end_id falls back to the last
    vocabulary id, pad_id to end_id (GPT-2 has no pad token)."""
    end_id = getattr(tokenizer, "eos_token_id", None) if tokenizer is not None else None
    if end_id is None:
        end_id = vocab_size - 1
    pad_id = getattr(tokenizer, "pad_token_id", None) if tokenizer is not None else None
    if pad_id is None:
        pad_id = end_id
    return end_id, pad_id


def run_engine(job):
    """Build the engine, warm up, time one generate. The only TensorRT-LLM calls."""
    import tensorrt_llm  # noqa: imported in the TensorRT-LLM env only
    from tensorrt_llm import SamplingParams
    from tensorrt_llm.commands.serve import get_llm_args

    got = get_llm_args(**llm_arg_request(job))
    llm_args = got[0] if isinstance(got, tuple) else got
    args = finish_llm_args(job, llm_args)
    if backend_name(job) in TENSORRT_BACKENDS:
        from tensorrt_llm._tensorrt_engine import LLM
    else:
        from tensorrt_llm import LLM
    tokenizer, vocab_size = None, 50257
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(job.get("tokenizer") or job["model"])
        vocab_size = tokenizer.vocab_size
    except Exception:
        pass
    end_id, pad_id = special_ids(tokenizer, vocab_size)
    llm = LLM(**args)
    try:
        prompts = job["prompt_token_ids"]
        if not job["skip_warmup"]:
            warm = SamplingParams(end_id=end_id, pad_id=pad_id, max_tokens=1, temperature=0.0, top_k=1,
                                  ignore_eos=True, detokenize=False)
            llm.generate(prompts[:1], warm, use_tqdm=False)
        params = SamplingParams(**timed_sampling(job, end_id, pad_id))
        start = time.perf_counter()
        outputs = llm.generate(prompts, params, use_tqdm=False)
        total_s = time.perf_counter() - start
    finally:
        llm.shutdown()
    total_output = sum(len(o.outputs[0].token_ids) for o in outputs)
    extra = {"library_version": getattr(tensorrt_llm, "__version__", None), "trtllm_backend": backend_name(job)}
    return {"total_s": total_s, "total_output_tokens": total_output, "extra": extra}


def main(argv=None):
    return common.run_main(run_engine, argv)


if __name__ == "__main__":
    sys.exit(main())
