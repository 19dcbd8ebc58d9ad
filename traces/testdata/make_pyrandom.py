#!/usr/bin/env python3
"""Reference draws from CPython's random.Random, for pyrandom_test.go.

The original harness built its base prompt with
    rng = random.Random(seed); [rng.randint(0, max(1, vocab_size // 2)) for _ in range(n)]
This script records such draws (stdlib only, deterministic) so the Go port can
be checked against CPython itself. Regenerate with:
    python3 traces/testdata/make_pyrandom.py > traces/testdata/pyrandom.json
"""
import json
import platform
import random

CASES = [
    # (seed, lo, hi, count)
    (42, 0, 50257 // 2, 1500),  # the original's default: GPT-2 vocab, seed 42
    (0, 0, 1, 64),
    (1, 0, 151936 // 2, 300),  # a Qwen-sized vocabulary
    (-7, 0, 999, 100),  # CPython seeds from abs(seed)
    (2**40 + 3, 0, 25128, 100),  # a seed wider than 32 bits
    (42, 5, 5, 3),  # a one-value range (getrandbits(1) until it draws 0)
]

out = {"python": platform.python_version(), "cases": []}
for seed, lo, hi, count in CASES:
    rng = random.Random(seed)
    out["cases"].append(
        {"seed": seed, "lo": lo, "hi": hi, "draws": [rng.randint(lo, hi) for _ in range(count)]}
    )
print(json.dumps(out, separators=(",", ":")))
