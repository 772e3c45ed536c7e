#!/usr/bin/env python3
"""Writes the GGUF seeds of fuzz_gguf that tests/data/gguf lacks (tests/fuzz/corpus/gguf/),
with the Python `gguf` package:

  spm_llama.gguf   a 1-layer Llama whose tokenizer is SentencePiece-style ("llama": tokens with
                   scores and types, the 256 byte tokens, merges rebuilt from the scores on load),
                   a chat template, BOS / EOS / padding ids, F16 and Q8_0 tensors

  python3 scripts/make_fuzz_seeds.py
"""
import os

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf.quants import quantize

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fuzz", "corpus", "gguf")


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(7)
    w = gguf.GGUFWriter(os.path.join(OUT, "spm_llama.gguf"), "llama")
    hidden, heads, kv_heads, ffn = 32, 4, 2, 64
    w.add_block_count(1)
    w.add_context_length(64)
    w.add_embedding_length(hidden)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    # SentencePiece-style vocabulary: <unk> <s> </s>, the byte tokens, then pieces
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    pieces = ["▁", "▁t", "he", "▁the", "▁a", "in", "er", "▁w", "or", "an", "▁s", "ll", "o", "l", "e", "h", "t",
              "a", "w", "s", "r", "n", "i", "▁in", "▁wor", "ld", "▁world", "▁hello", "▁h", "el", "lo"]
    tokens += pieces
    scores = [0.0, 0.0, 0.0] + [0.0] * 256 + [-float(i) for i in range(len(pieces))]
    types = [2, 3, 3] + [6] * 256 + [1] * len(pieces)
    vocab = len(tokens)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_pad_token_id(0)
    w.add_add_bos_token(True)
    w.add_chat_template("{{ bos_token }}{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}{{ eos_token }}"
                        "{% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}")
    f = lambda *shape: rng.standard_normal(shape).astype(np.float32) * 0.1
    w.add_tensor("token_embd.weight", f(vocab, hidden).astype(np.float16))
    w.add_tensor("output_norm.weight", np.ones(hidden, dtype=np.float32))
    hd = hidden // heads
    for name, shape in [("attn_q", (heads * hd, hidden)), ("attn_k", (kv_heads * hd, hidden)),
                        ("attn_v", (kv_heads * hd, hidden)), ("attn_output", (hidden, heads * hd)),
                        ("ffn_gate", (ffn, hidden)), ("ffn_up", (ffn, hidden)), ("ffn_down", (hidden, ffn))]:
        t = f(*shape)
        w.add_tensor(f"blk.0.{name}.weight", quantize(t, Q.Q8_0), raw_shape=quantize(t, Q.Q8_0).shape,
                     raw_dtype=Q.Q8_0)
    w.add_tensor("blk.0.attn_norm.weight", np.ones(hidden, dtype=np.float32))
    w.add_tensor("blk.0.ffn_norm.weight", np.ones(hidden, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
