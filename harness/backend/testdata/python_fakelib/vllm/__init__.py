"""Fake vllm: LLM and SamplingParams as the offline driver uses them."""
import os
import time

__version__ = "0.13.0+fake"

_ACCEPTED = {"model", "tokenizer", "tensor_parallel_size", "trust_remote_code", "async_scheduling", "dtype",
             "attention_backend", "max_num_seqs", "max_model_len"}


class SamplingParams:
    def __init__(self, max_tokens=16, temperature=1.0, top_p=1.0, top_k=-1, ignore_eos=False, detokenize=True):
        if detokenize:
            raise AssertionError("the driver must not detokenize")
        if top_k == 0:
            raise ValueError("top_k must be -1 (disable) or at least 1")
        self.max_tokens = max_tokens


class _Completion:
    def __init__(self, n):
        self.token_ids = list(range(n))


class _RequestOutput:
    def __init__(self, n):
        self.outputs = [_Completion(n)]


class LLM:
    def __init__(self, **kwargs):
        unknown = set(kwargs) - _ACCEPTED
        if os.environ.get("FAKE_VLLM_NO_ATTENTION_BACKEND") == "1" and "attention_backend" in kwargs:
            unknown.add("attention_backend")
        if unknown:
            raise TypeError("LLM.__init__() got an unexpected keyword argument %r" % sorted(unknown)[0])
        if os.environ.get("FAKE_OOM") == "1":
            raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 MiB")
        self.kwargs = kwargs

    def generate(self, prompts, params, use_tqdm=True):
        for p in prompts:
            if set(p) != {"prompt_token_ids"}:
                raise AssertionError("prompts must be TokensPrompt dicts")
        time.sleep(float(os.environ.get("FAKE_SLEEP_S", "0")))
        return [_RequestOutput(params.max_tokens) for _ in prompts]
