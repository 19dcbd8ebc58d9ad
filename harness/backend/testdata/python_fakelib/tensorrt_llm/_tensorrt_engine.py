"""Fake TensorRT-engine LLM: takes no backend argument."""
from tensorrt_llm import LLM as _Base


class LLM(_Base):
    def __init__(self, **kwargs):
        if "backend" in kwargs:
            raise TypeError("unexpected keyword argument 'backend'")
        super().__init__(**kwargs)
