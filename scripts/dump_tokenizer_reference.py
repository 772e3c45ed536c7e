#!/usr/bin/env python3
"""Dumps reference token ids from Hugging Face `tokenizers` for the C++
tokenizer tests (tests/unit/test_tokenizer_*.cpp).

The texts are lines of ../shared/data/text/ (wiki.test.raw, ptb.test.txt),
which the test reads itself; the reference stores, per case, the number of ids
and an FNV-1a 64 hash of them (little-endian int32s), the full ids for the
first --full cases, and a set of crafted strings (special tokens, whitespace
runs, contractions, non-Latin scripts, emoji) with ids and decoded text.

    python3 scripts/dump_tokenizer_reference.py --tokenizer tests/data/tokenizer/bpe_gpt2/tokenizer.json \\
        --text-dir ../shared/data/text --out tests/data/tokenizer/bpe_gpt2/reference.json
    # a SentencePiece model, through the `sentencepiece` library:
    python3 scripts/dump_tokenizer_reference.py --sentencepiece ../shared/data/tokenizers/llama2/tokenizer.model ...
"""
import argparse
import json
import os

import tokenizers

FILES = ["wiki.test.raw", "ptb.test.txt"]

CRAFTED = [
    "Hello world", "", " ", "\n", "   ", "  leading spaces", "trailing  ", "ends with space ",
    "tabs\tand\nnewlines\r\n\r\nhere", "multiple   spaces   here", "A\n\n\nB  \n C", "\r\n\r\n", " \n",
    "I'm you're we'LL THEY'RE she'd it's", "'s 's '' 'x", "\u017f'S test 'Ll",
    "numbers 1234567 3.14159 1,000,000 and 42nd", "\u0663\u0664\u0665 \u2460\u2461 \u00bd",
    "unicode: caf\u00e9 na\u00efve Z\u00fcrich \u2014 \u201cquotes\u201d \u20ac 5",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8", "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac",
    "emoji \U0001f642 \U0001f44d\U0001f3fd family \U0001f468\u200d\U0001f469\u200d\U0001f467",
    "mixed\u00a0nbsp\u2003emspace\u3000ideographic", "combining e\u0301 a\u0308",
    "special <|im_start|>user\nHi<|im_end|>\n", "<|endoftext|>", "a<|im_end|>b", "<|begin_of_text|>x<|eot_id|>",
    "<tool> x </tool>   y", "call  <tool>args</tool>\n done", "the [mask] token a[mask]b [mask]",
    "<s> and </s> in text", "<unk>", "<think>step</think> answer",
    "\u0000 control \u001b[0m \u007f", "((nested)) [brackets] {braces} <tags/>",
    "http://example.com/path?query=1&b=2#frag", "x" * 300, "word " * 60, "\u2581already\u2581meta",
    # NFC: composition, reordering, singletons, Hangul, blocked marks
    "e\u0301 A\u030a \u212b \u2126 a\u0328\u0301 q\u0307\u0323 \u1e9b\u0323 e\u0302\u0301",
    "\u1100\u1161\u11a8 \u1100\u1161 \uac00\u11a8 \u0915\u093c \u0627\u0653 a\u05ae\u0300\u0301b",
    "\u00e9\u0301 \u0041\u0300\u0316 \u1fbf\u0301 \u0344 \u0f73 \u2000 \uf900",
]


def fnv1a64(ids):
    h = 0xcbf29ce484222325
    for i in ids:
        for b in (i & 0xFFFFFFFF).to_bytes(4, "little"):
            h ^= b
            h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def cases(text_dir, wiki_step, ptb_step, chunks):
    """(file index, first line, number of lines) of the texts to encode."""
    out = []
    lines = {}
    for fi, name in enumerate(FILES):
        with open(os.path.join(text_dir, name), encoding="utf-8", newline="") as f:
            lines[fi] = f.read().split("\n")
    for i, l in enumerate(lines[0]):
        if l and i % wiki_step == 0:
            out.append((0, i, 1))
    for i, l in enumerate(lines[1]):
        if l and i % ptb_step == 0:
            out.append((1, i, 1))
    n = len(lines[0])
    for k in range(chunks):  # several lines with their newlines (and empty lines)
        first = (k * 7919) % (n - 5)
        out.append((0, first, 4))
    return out, lines


class HfBackend:
    def __init__(self, path):
        self.tok = tokenizers.Tokenizer.from_file(path)
        self.version = "tokenizers " + tokenizers.__version__

    def encode(self, text, add_special):
        return self.tok.encode(text, add_special_tokens=add_special).ids

    def decode(self, ids, skip_special):
        return self.tok.decode(ids, skip_special_tokens=skip_special)

    def vocab_size(self):
        return self.tok.get_vocab_size(with_added_tokens=True)


class SpmBackend:
    """The `sentencepiece` library with the Llama-2 conventions: BOS first, and
    the control / unknown pieces ("<s>", "</s>", "<unk>") in the text taken as
    those tokens, each text piece between them encoded on its own (as Meta's
    Llama-2 code builds chat prompts). Decoding drops them (skip_special)."""

    def __init__(self, path):
        import re
        import sentencepiece
        self.sp = sentencepiece.SentencePieceProcessor(model_file=path)
        self.version = "sentencepiece " + sentencepiece.__version__
        self.special = {self.sp.id_to_piece(i): i for i in range(self.sp.get_piece_size())
                        if self.sp.is_control(i) or self.sp.is_unknown(i)}
        names = sorted(self.special, key=len, reverse=True)
        self.split_re = re.compile("(" + "|".join(re.escape(n) for n in names) + ")")

    def encode(self, text, add_special):
        ids = [self.sp.bos_id()] if add_special else []
        for part in self.split_re.split(text):
            if part in self.special:
                ids.append(self.special[part])
            elif part:
                ids += self.sp.encode(part)
        return ids

    def decode(self, ids, skip_special):
        if not skip_special:
            return None  # sentencepiece has no way to show control pieces
        return self.sp.decode([i for i in ids if i not in self.special.values()])

    def vocab_size(self):
        return self.sp.get_piece_size()


def load(args):
    if args.sentencepiece:
        return SpmBackend(args.sentencepiece)
    return HfBackend(args.tokenizer)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", help="tokenizer.json")
    ap.add_argument("--sentencepiece", help="tokenizer.model (converted by transformers)")
    ap.add_argument("--text-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--wiki-step", type=int, default=2)
    ap.add_argument("--ptb-step", type=int, default=3)
    ap.add_argument("--chunks", type=int, default=200)
    ap.add_argument("--full", type=int, default=100)
    args = ap.parse_args()
    tok = load(args)

    sel, lines = cases(args.text_dir, args.wiki_step, args.ptb_step, args.chunks)
    hashed, full = [], []
    for k, (fi, first, count) in enumerate(sel):
        text = "\n".join(lines[fi][first:first + count])
        ids = tok.encode(text, False)
        roundtrip = tok.decode(ids, True) == text
        hashed.append([fi, first, count, len(ids), fnv1a64(ids), int(roundtrip)])
        if k < args.full:
            full.append([fi, first, count, ids])
    crafted = []
    for text in CRAFTED:
        with_special = tok.encode(text, True)
        plain = tok.encode(text, False)
        case = {"text": text, "ids": with_special, "ids_plain": plain,
                "decoded_skip": tok.decode(with_special, True)}
        decoded = tok.decode(plain, False)
        if decoded is not None:
            case["decoded"] = decoded
        crafted.append(case)
    ref = {"generator": "scripts/dump_tokenizer_reference.py", "reference": tok.version,
           "files": FILES, "vocab_size": tok.vocab_size(),
           "cases": hashed, "full": full, "crafted": crafted}
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(ref, f, ensure_ascii=False, separators=(",", ":"))
    total = sum(c[3] for c in hashed)
    print(f"{args.out}: {len(hashed)} cases, {total} ids, {os.path.getsize(args.out)} bytes")


if __name__ == "__main__":
    main()
