#!/usr/bin/env python3
"""Golden token ids for engine/tokenizer's Qwen3 tokenizer from HF tokenizers.

Writes qwen3_hf_ids.json: for every line {"text": ...} of qwen3_corpus.jsonl,
and for a fixed set of random strings built from tricky pieces (whitespace
runs, line breaks, digits, contractions in both cases, combining marks,
emoji, added tokens), the ids that tokenizers.Tokenizer gives (encode without
post-processing; Qwen's ByteLevel post-processor adds nothing anyway) and the
text its decode gives back with skip_special_tokens false and true.

The source of truth is the Rust `tokenizers` library reading tokenizer.json
directly. When transformers is installed, AutoTokenizer on the same directory
(tokenizer.json + tokenizer_config.json, local files only) is compared too;
any disagreement is recorded under "transformers_mismatches" and printed, not
fatal (it would be a difference between the two HF libraries).

No network is needed. The tokenizer files are the committed ones:

  mkdir -p DIR
  gunzip -c engine/tokenizer/data/qwen3/tokenizer.json.gz > DIR/tokenizer.json
  cp engine/tokenizer/data/qwen3/tokenizer_config.json DIR/
  python3 engine/tokenizer/testdata/make_qwen3_ids.py --tokenizer-dir DIR \\
      --corpus engine/tokenizer/testdata/qwen3_corpus.jsonl \\
      --out engine/tokenizer/testdata/qwen3_hf_ids.json
"""
import argparse
import hashlib
import json
import os
import random
import sys

import tokenizers

# Pieces the random strings are built from: each stresses one alternative of
# Qwen2's split regex, the NFC normalizer or added-token matching.
RANDOM_PIECES = [
    "a", "Z", "word", "Word", " the", "é", "e\u0301", "A\u030a", "ﬁ", "日本", "語", "한국", "ع", "я", "ß",
    " ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r", " \n", "\u00a0", "\u3000", "\u2009", "\u200b",
    "1", "23", "456789", "٣", "½", "①", "²",
    "'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'ve", "'VE", "'m", "'M", "'ll", "'LL", "'d", "'D", "'", "'x",
    "!", "?", ".", ",", ";", "...", "!!", "(", ")", "{", "}", "<", ">", "|", "_", "-", "=", "#", "`", '"', "\\",
    "😀", "🧬", "👩‍💻", "🇯🇵", "\u0301", "\u0308",
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>", "<|im_start", "|>",
]
RANDOM_SEED = 34
RANDOM_COUNT = 500


def random_texts():
    rng = random.Random(RANDOM_SEED)
    out = []
    for _ in range(RANDOM_COUNT):
        n = rng.randint(1, 24)
        out.append("".join(rng.choice(RANDOM_PIECES) for _ in range(n)))
    return out


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer-dir", required=True, help="directory holding tokenizer.json (+ tokenizer_config.json)")
    ap.add_argument("--corpus", required=True, help="qwen3_corpus.jsonl")
    ap.add_argument("--out", required=True, help="qwen3_hf_ids.json to write")
    args = ap.parse_args()

    tj_path = os.path.join(args.tokenizer_dir, "tokenizer.json")
    tok = tokenizers.Tokenizer.from_file(tj_path)

    texts = []
    with open(args.corpus, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            entry = json.loads(line)
            if not isinstance(entry.get("text"), str):
                sys.exit(f"{args.corpus}:{n}: want {{\"text\": \"...\"}}")
            texts.append(entry["text"])

    def case(text):
        ids = tok.encode(text, add_special_tokens=False).ids
        return {
            "ids": ids,
            "decoded": tok.decode(ids, skip_special_tokens=False),
            "decoded_skip_special": tok.decode(ids, skip_special_tokens=True),
        }

    cases = []
    for i, text in enumerate(texts):
        c = case(text)
        c["line"] = i + 1
        cases.append(c)
    random_cases = []
    for text in random_texts():
        c = case(text)
        c["text"] = text
        random_cases.append(c)

    out = {
        "generated_by": "engine/tokenizer/testdata/make_qwen3_ids.py",
        "tokenizers": tokenizers.__version__,
        "tokenizer_json_sha256": sha256(tj_path),
        "vocab_size_with_added": tok.get_vocab_size(with_added_tokens=True),
        "random_seed": RANDOM_SEED,
        "cases": cases,
        "random_cases": random_cases,
    }

    # Cross-check with transformers, when it is there: informational only.
    try:
        import transformers

        out["transformers"] = transformers.__version__
        auto = transformers.AutoTokenizer.from_pretrained(args.tokenizer_dir, local_files_only=True)
        out["transformers_class"] = type(auto).__name__
        mismatches = []
        for text, c in [(t, c) for t, c in zip(texts, cases)] + [(c["text"], c) for c in random_cases]:
            ids = list(auto.encode(text, add_special_tokens=False))
            if ids != c["ids"]:
                mismatches.append({"text": text, "tokenizers": c["ids"], "transformers": ids})
        out["transformers_mismatches"] = mismatches
        if mismatches:
            print(f"warning: transformers differs from tokenizers on {len(mismatches)} texts", file=sys.stderr)
    except Exception as e:  # noqa: BLE001 - recorded, not fatal
        out["transformers_error"] = f"{type(e).__name__}: {e}"
        print(f"note: transformers cross-check skipped: {out['transformers_error']}", file=sys.stderr)

    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    n_ids = sum(len(c["ids"]) for c in cases)
    print(f"wrote {args.out}: {len(cases)} corpus lines ({n_ids} ids), {len(random_cases)} random strings, "
          f"tokenizers {tokenizers.__version__}")


if __name__ == "__main__":
    main()
