"""Fake get_llm_args: returns (llm_args, extra) as the 1.x code does."""


def get_llm_args(model, tokenizer=None, backend="pytorch", max_batch_size=2048, max_num_tokens=8192,
                 max_seq_len=None, tensor_parallel_size=1, trust_remote_code=False, **kwargs):
    args = {"model": model, "tokenizer": tokenizer, "backend": backend, "max_batch_size": max_batch_size,
            "max_num_tokens": max_num_tokens, "max_seq_len": max_seq_len,
            "tensor_parallel_size": tensor_parallel_size, "trust_remote_code": trust_remote_code}
    return args, {}
