#!/usr/bin/env python3
"""Golden token ids for engine/tokenizer from HF transformers' GPT-2 tokenizers.

Writes hf_ids.json: for every line of corpus.jsonl, the ids HF's GPT2TokenizerFast
gives (encode with default settings: no BOS, <|endoftext|> in the text is the
special id 50256) and the text its decode gives back. Three implementations
are run and must agree on every line; the script asserts it:

  fast    transformers.GPT2TokenizerFast (Rust tokenizers)
  slow    transformers.GPT2Tokenizer, when it is a Python implementation
  openai  OpenAI's own encoder.py algorithm (gpt-2/src/encoder.py), inlined
          below, reading the same vocab.json + merges.txt

The vocabulary directory comes from Go's WriteFiles (tokenizer_test.go checks
those files against the MD5s of OpenAI's GPT-2 encoder.json and vocab.bpe), so
no network is needed:

  go run ./engine/tokenizer/testdata/writevocab .gpu/tok
  cp engine/tokenizer/testdata/{make_fixtures.py,corpus.jsonl} .gpu/tok/
  python3 .gpu/tok/make_fixtures.py --vocab-dir .gpu/tok \
      --corpus .gpu/tok/corpus.jsonl --out hf_ids.json

Corpus lines are one of
  {"text": "..."}          a string to encode (and decode back)
  {"b64": "..."}           raw bytes, possibly invalid UTF-8, to encode: they are
                           first read the way Go's encoding/json reads a request
                           body, each byte Go's utf8.DecodeRune rejects becoming
                           U+FFFD (go_text below); Go's Encode does the same
  {"ids": [...]}           ids to decode only (ids that split UTF-8 characters;
                           decode uses errors="replace")
each with an optional "note". The output also holds --random short random
texts (random_cases, generated here with a fixed seed) and their ids.

--reference-only skips transformers (for checking the corpus on a machine
without it); its output is marked so the Go test refuses it as a fixture.
"""
import argparse
import base64
import glob
import hashlib
import json
import os
import sys

import regex  # transformers depends on it; OpenAI's encoder.py uses it too

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
END_OF_TEXT = "<|endoftext|>"


def go_text(raw):
    """Reads raw bytes as Go's encoding/json does: every byte that does not
    start a valid UTF-8 sequence becomes one U+FFFD (Python's own
    errors="replace" would give one U+FFFD per maximal invalid subpart)."""
    out, i = [], 0
    while i < len(raw):
        for k in (1, 2, 3, 4):
            try:
                out.append(raw[i:i + k].decode("utf-8"))
                i += k
                break
            except UnicodeDecodeError:
                pass
        else:
            out.append("\ufffd")
            i += 1
    return "".join(out)


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) + \
        list(range(ord("\u00ae"), ord("\u00ff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


class OpenAIEncoder:
    """GPT-2's reference tokenizer (openai/gpt-2 src/encoder.py), plus the
    literal <|endoftext|> split HF applies to special tokens."""

    def __init__(self, vocab_dir):
        with open(os.path.join(vocab_dir, "vocab.json"), encoding="utf-8") as f:
            self.encoder = json.load(f)
        self.decoder = {v: k for k, v in self.encoder.items()}
        with open(os.path.join(vocab_dir, "merges.txt"), encoding="utf-8") as f:
            merges = [tuple(line.split()) for line in f.read().split("\n")[1:-1]]
        self.bpe_ranks = dict(zip(merges, range(len(merges))))
        self.byte_encoder = bytes_to_unicode()
        self.byte_decoder = {v: k for k, v in self.byte_encoder.items()}
        self.pat = regex.compile(GPT2_PATTERN)

    def bpe(self, token):
        word = tuple(token)
        while len(word) > 1:
            pairs = {(word[i], word[i + 1]) for i in range(len(word) - 1)}
            bigram = min(pairs, key=lambda p: self.bpe_ranks.get(p, float("inf")))
            if bigram not in self.bpe_ranks:
                break
            first, second = bigram
            new_word, i = [], 0
            while i < len(word):
                try:
                    j = word.index(first, i)
                except ValueError:
                    new_word.extend(word[i:])
                    break
                new_word.extend(word[i:j])
                i = j
                if word[i] == first and i < len(word) - 1 and word[i + 1] == second:
                    new_word.append(first + second)
                    i += 2
                else:
                    new_word.append(word[i])
                    i += 1
            word = tuple(new_word)
        return word

    def encode(self, text):
        ids = []
        for k, part in enumerate(text.split(END_OF_TEXT)):
            if k > 0:
                ids.append(self.encoder[END_OF_TEXT])
            for token in regex.findall(self.pat, part):
                token = "".join(self.byte_encoder[b] for b in token.encode("utf-8"))
                ids.extend(self.encoder[t] for t in self.bpe(token))
        return ids

    def decode(self, ids):
        text = "".join(self.decoder[i] for i in ids)
        return bytearray(self.byte_decoder[c] for c in text).decode("utf-8", errors="replace")


def load_hf(vocab_dir):
    """Returns {name: tokenizer} for the HF implementations that load, and
    notes on what was loaded or why not."""
    import transformers

    toks, notes = {}, {"transformers": transformers.__version__}
    try:
        import tokenizers
        notes["tokenizers"] = tokenizers.__version__
    except ImportError:
        pass
    fast_cls = getattr(transformers, "GPT2TokenizerFast", None) or transformers.AutoTokenizer
    fast = fast_cls.from_pretrained(vocab_dir)
    assert getattr(fast, "is_fast", False), "%s is not a fast tokenizer" % type(fast).__name__
    toks["fast"] = fast
    notes["fast_class"] = type(fast).__name__
    notes["fast_vocab_size"] = len(fast)
    notes["fast_eos_token_id"] = fast.eos_token_id
    try:
        slow = transformers.GPT2Tokenizer.from_pretrained(vocab_dir)
        notes["slow_class"] = type(slow).__name__
        if getattr(slow, "is_fast", False) or type(slow) is type(fast):
            notes["slow"] = "GPT2Tokenizer is the tokenizers-backed class in this version; not compared separately"
        else:
            toks["slow"] = slow
    except Exception as e:  # the run must still produce the fast ids
        notes["slow"] = "failed to load: %r" % (e,)
    return toks, notes


def hf_encode(tok, text):
    return list(tok.encode(text))


def hf_decode(tok, ids):
    try:
        return tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    except TypeError:  # a version without these keywords; tokenizer_config.json sets the same
        return tok.decode(ids)


def random_texts(n, seed=2):
    """Short random mixes of the characters the pre-tokenizer and BPE treat
    differently (all assigned since Unicode 6, so every library's tables agree)."""
    import random

    rng = random.Random(seed)
    alphabet = list("  \t\n\r''sdtmlvre aAzZ09.,!?-_/<|>" "\u00e9\u00fc\u00df\u0301\u00a0\u3000\u2028\u0085"
                    "\u4e2d\u6587\u3042\u30a2\ud55c\u0416\u03bb\u05d0\u0627\u0939\u093f\u0e01\u0e31"
                    "\u0663\u00bd\u2460\u216b\u2014\u201c\u2026\u20ac\ufffd\u200b\x00\x1f\x7f"
                    "\U0001F600\U0001F916\U0001F3FD\u200d\ufe0f") + [END_OF_TEXT, "'ll", "'re", "'ve"]
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 24))) for _ in range(n)]


def reference_files_md5(vocab_dir):
    """MD5s of our files and of any real gpt2 tokenizer files in the HF cache,
    recorded so a reader can compare them."""
    out = {}
    for name in ("vocab.json", "merges.txt"):
        with open(os.path.join(vocab_dir, name), "rb") as f:
            out["ours/" + name] = hashlib.md5(f.read()).hexdigest()
    home = os.environ.get("HF_HOME", os.path.expanduser("~/.cache/huggingface"))
    for path in glob.glob(os.path.join(home, "hub", "models--*gpt2*", "snapshots", "*", "*")):
        if os.path.basename(path) in ("vocab.json", "merges.txt"):
            with open(path, "rb") as f:
                out[os.path.relpath(path, home)] = hashlib.md5(f.read()).hexdigest()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vocab-dir", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--reference-only", action="store_true")
    ap.add_argument("--random", type=int, default=400, help="random texts to add (stored in the output)")
    args = ap.parse_args()

    with open(args.corpus, encoding="utf-8") as f:
        corpus = [json.loads(line) for line in f if line.strip()]

    openai = OpenAIEncoder(args.vocab_dir)
    if args.reference_only:
        toks, notes = {}, {"source": "openai-reference-only (NOT an HF fixture)"}
    else:
        toks, notes = load_hf(args.vocab_dir)
        notes["source"] = "transformers"
    notes["compared"] = sorted(toks) + ["openai"]
    notes["files_md5"] = reference_files_md5(args.vocab_dir)

    def run_all(text=None, ids=None):
        """(ids, decoded) from every implementation, errors as strings."""
        results = {}
        for name, t in list(toks.items()) + [("openai", openai)]:
            try:
                got = ids if text is None else (hf_encode(t, text) if name != "openai" else t.encode(text))
                results[name] = (got, hf_decode(t, got) if name != "openai" else t.decode(got))
            except Exception as e:  # recorded as a mismatch, the run goes on
                results[name] = ("error", repr(e))
        return results

    def check(label, results):
        ref = results["fast"] if "fast" in results else results["openai"]
        for name, got in results.items():
            if got != ref:
                mismatches.append({"case": label, "impl": name, "got": got, "want": ref})
        return ref

    cases, randoms, mismatches = [], [], []
    for n, entry in enumerate(corpus, 1):
        if "ids" in entry:
            ref = check("line %d" % n, run_all(ids=entry["ids"]))
        else:
            text = entry["text"] if "text" in entry else go_text(base64.b64decode(entry["b64"]))
            ref = check("line %d" % n, run_all(text=text))
        cases.append({"line": n, "ids": ref[0], "decoded": ref[1]})
    for k, text in enumerate(random_texts(args.random)):
        ref = check("random %d" % k, run_all(text=text))
        randoms.append({"text": text, "ids": ref[0]})

    out = {"generated_by": "engine/tokenizer/testdata/make_fixtures.py", **notes,
           "mismatches": mismatches, "cases": cases, "random_cases": randoms}
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=True, separators=(",", ":"))
        f.write("\n")
    print(json.dumps({k: v for k, v in out.items() if k not in ("cases", "random_cases")}, indent=1)[:8000])
    print("%d corpus lines, %d random texts, %d mismatches between implementations"
          % (len(cases), len(randoms), len(mismatches)))
    # Written first so a failing run still shows what disagreed.
    assert not mismatches, "implementations disagree; see mismatches in " + args.out


if __name__ == "__main__":
    sys.exit(main())
