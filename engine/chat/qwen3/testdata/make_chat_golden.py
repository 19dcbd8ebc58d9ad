#!/usr/bin/env python3
"""Writes chat_golden.json: what transformers' apply_chat_template makes of
every conversation in conversations.json, with enable_thinking true and false.

Usage (from the repository root; no network):

    python3 engine/chat/qwen3/testdata/make_chat_golden.py engine/tokenizer/data/qwen3

DIR holds tokenizer_config.json (with the chat template) and tokenizer.json,
or tokenizer.json.gz as the repository stores it (then both are copied to a
temporary directory with tokenizer.json unpacked). The output goes beside this
script unless a second argument names another path.

roseinfer renders a "developer" turn as "system" (the template has no developer
branch and would drop the turn), so this script renames the role the same way
before calling the template; everything else goes to the template as written,
reasoning_content included (null means absent).
"""

import gzip
import json
import os
import shutil
import sys
import tempfile

import transformers
from transformers import AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))


def tokenizer_dir(src, tmp):
    """A directory with tokenizer.json and tokenizer_config.json."""
    if os.path.exists(os.path.join(src, "tokenizer.json")):
        return src
    packed = os.path.join(src, "tokenizer.json.gz")
    if not os.path.exists(packed):
        sys.exit(f"{src}: neither tokenizer.json nor tokenizer.json.gz")
    with gzip.open(packed, "rb") as f, open(os.path.join(tmp, "tokenizer.json"), "wb") as out:
        shutil.copyfileobj(f, out)
    shutil.copy(os.path.join(src, "tokenizer_config.json"), tmp)
    return tmp


def as_ids(out):
    """apply_chat_template(tokenize=True) returns a list of ids in
    transformers 4 and a BatchEncoding in 5; either becomes a list of ints."""
    if hasattr(out, "keys") and "input_ids" in out:
        out = out["input_ids"]
    if hasattr(out, "tolist"):
        out = out.tolist()
    if out and isinstance(out[0], list):
        assert len(out) == 1, "one conversation gives one id list"
        out = out[0]
    return [int(i) for i in out]


def template_messages(messages):
    out = []
    for m in messages:
        m = dict(m)
        if m["role"] == "developer":
            m["role"] = "system"
        out.append(m)
    return out


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    out_path = sys.argv[2] if len(sys.argv) == 3 else os.path.join(HERE, "chat_golden.json")
    with open(os.path.join(HERE, "conversations.json"), encoding="utf-8") as f:
        conversations = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        tok = AutoTokenizer.from_pretrained(tokenizer_dir(sys.argv[1], tmp), local_files_only=True)
        cases = []
        for conv in conversations:
            msgs = template_messages(conv["messages"])
            for thinking in (True, False):
                kw = dict(add_generation_prompt=True, enable_thinking=thinking)
                text = tok.apply_chat_template(msgs, tokenize=False, **kw)
                ids = as_ids(tok.apply_chat_template(msgs, tokenize=True, **kw))
                cases.append({"name": conv["name"], "enable_thinking": thinking, "text": text, "ids": ids})
    golden = {
        "generator": "engine/chat/qwen3/testdata/make_chat_golden.py",
        "transformers_version": transformers.__version__,
        "cases": cases,
    }
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {out_path} (transformers {transformers.__version__})")


if __name__ == "__main__":
    main()
