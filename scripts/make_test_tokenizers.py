#!/usr/bin/env python3
"""Trains the small tokenizers the tokenizer tests use (vocab ~1,000, on Penn
Treebank test text) with the Hugging Face `tokenizers` library, and writes
them to tests/data/tokenizer/<name>/tokenizer.json:

  bpe_gpt2        Split(GPT-2 pattern) + ByteLevel(use_regex=False), merges as "a b" strings
  bpe_llama3      Split(Llama-3 pattern) + ByteLevel, BOS template, added tokens with lstrip/rstrip
  bpe_qwen2       NFC + Split(Qwen2 pattern) + ByteLevel, special + non-special added tokens
  bpe_digits      Digits(individual) + ByteLevel(use_regex=True) (SmolLM2's original layout)
  bpe_bytefallback  Llama-2 style: Prepend/Replace normalizer, byte fallback, unk, no pre-tokenizer
  bpe_metaspace   Metaspace(prepend_scheme="first") + byte fallback

    python3 scripts/make_test_tokenizers.py --text ../shared/data/text/ptb.test.txt
"""
import argparse
import json
import os

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
QWEN2 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
VOCAB = 1000


def byte_level(pattern):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    return tok


def train_byte_level(tok, lines, specials):
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(lines, trainer)
    return tok


def byte_fallback(lines, metaspace):
    tok = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    if metaspace:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=True)
        tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="first", split=True)
    else:
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
        tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                         decoders.Strip(" ", 1, 0)])
    specials = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=specials, show_progress=False,
                                  limit_alphabet=100)
    tok.train_from_iterator(lines, trainer)
    # Byte tokens are ordinary vocabulary in Llama's tokenizer.json, not added tokens.
    data = json.loads(tok.to_str())
    data["added_tokens"] = [a for a in data["added_tokens"] if a["content"] in ("<unk>", "<s>", "</s>")]
    tok = Tokenizer.from_str(json.dumps(data))
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)])
    return tok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--text", required=True, help="training text (ptb.test.txt)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "data", "tokenizer"))
    args = ap.parse_args()
    with open(args.text, encoding="utf-8") as f:
        lines = [l.rstrip("\n") for l in f]
    # A little non-ASCII so the byte-level merges see multi-byte characters.
    lines += ["café naïve Zürich — “quotes” € 100", "日本語のテキスト", "Ελληνικά κείμενα", "emoji 🙂 👍🏽"] * 20

    out = {}
    t = train_byte_level(byte_level(GPT2), lines, ["<|endoftext|>"])
    out["bpe_gpt2"] = t

    t = train_byte_level(byte_level(LLAMA3), lines, ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"])
    t.add_tokens([AddedToken("<tool>", lstrip=True, rstrip=False, normalized=False, special=False),
                  AddedToken("</tool>", lstrip=False, rstrip=True, normalized=False, special=False),
                  AddedToken("[mask]", single_word=True, normalized=True, special=False)])
    bos = t.token_to_id("<|begin_of_text|>")
    t.post_processor = processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A $B",
                                                     special_tokens=[("<|begin_of_text|>", bos)])
    out["bpe_llama3"] = t

    t = train_byte_level(byte_level(QWEN2), lines, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    t.add_tokens(["<think>", "</think>"])
    t.normalizer = normalizers.NFC()  # as Qwen2's own tokenizer.json
    out["bpe_qwen2"] = t

    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                               pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    t.decoder = decoders.ByteLevel()
    out["bpe_digits"] = train_byte_level(t, lines, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])

    out["bpe_bytefallback"] = byte_fallback(lines, metaspace=False)
    out["bpe_metaspace"] = byte_fallback(lines, metaspace=True)

    for name, tok in out.items():
        d = os.path.join(args.out, name)
        os.makedirs(d, exist_ok=True)
        data = json.loads(tok.to_str())
        if name == "bpe_gpt2":  # the older "a b" merge format
            data["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in data["model"]["merges"]]
        with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, separators=(",", ":"))
        print(name, len(data["model"]["vocab"]), "tokens")


if __name__ == "__main__":
    main()
