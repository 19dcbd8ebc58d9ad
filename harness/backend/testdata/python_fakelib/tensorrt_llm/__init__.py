"""Fake tensorrt_llm: SamplingParams and the PyTorch-backend LLM."""
import os

if os.environ.get("FAKE_IMPORT_ERROR") == "1":
    raise ImportError("libmpi.so.40: cannot open shared object file: No such file or directory")

__version__ = "1.1.0+fake"


class SamplingParams:
    def __init__(self, end_id=None, pad_id=None, max_tokens=32, temperature=None, top_p=None, top_k=None,
                 ignore_eos=False, detokenize=True):
        if end_id is None or detokenize:
            raise AssertionError("end_id is required and detokenize must be off")
        self.max_tokens = max_tokens


class _Completion:
    def __init__(self, n):
        self.token_ids = list(range(n))


class _Output:
    def __init__(self, n):
        self.outputs = [_Completion(n)]


class LLM:
    """The PyTorch backend's LLM (takes a backend argument)."""

    def __init__(self, **kwargs):
        if not kwargs.get("skip_tokenizer_init"):
            raise AssertionError("the driver must skip the tokenizer")
        self.kwargs = kwargs

    def generate(self, prompts, params, use_tqdm=True):
        return [_Output(params.max_tokens) for _ in prompts]

    def shutdown(self):
        pass
