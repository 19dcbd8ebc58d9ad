"""Fake sglang Engine: generate(input_ids, sampling_params) -> dicts with meta_info."""


class Engine:
    def __init__(self, **kwargs):
        if not kwargs.get("skip_tokenizer_init"):
            raise AssertionError("the driver must skip the tokenizer")
        self.shut = False

    def generate(self, input_ids, sampling_params):
        if len(input_ids) != len(sampling_params):
            raise AssertionError("one sampling dict per prompt")
        return [{"output_ids": list(range(s["max_new_tokens"])),
                 "meta_info": {"prompt_tokens": len(ids), "completion_tokens": s["max_new_tokens"]}}
                for ids, s in zip(input_ids, sampling_params)]

    def shutdown(self):
        self.shut = True
