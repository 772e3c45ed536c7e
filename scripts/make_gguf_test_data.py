#!/usr/bin/env python3
"""Writes the GGUF reader's test data (tests/data/gguf/) with the Python `gguf`
package, the reference implementation of the format and of ggml's dequantization.

  quants.gguf              every metadata value type (arrays, nested arrays), alignment 64,
                           one tensor per supported ggml type, each followed by `<name>.ref`:
                           F32 = gguf.quants.dequantize of it
  tiny_llama.gguf          a 2-layer Llama (hidden 32, 4 heads, 2 KV heads) with a byte-level
                           BPE tokenizer; q/k rows permuted the way llama.cpp's converter does
  tiny_llama_hf.safetensors  its tensors under Hugging Face names, as the reader must return them
  tiny_llama_16bit.gguf    a 1-layer Llama with every matrix F16 or BF16 (q / k permuted), no
                           tokenizer; tiny_llama_16bit_hf.safetensors its tensors widened to F32
  smollm2_ref.json         (with --model FILE.gguf) first/last rows, sums of a few real tensors of
                           the default model, dequantized by gguf.quants.dequantize

  python3 scripts/make_gguf_test_data.py [--model SmolLM2-135M-Instruct.Q4_1.gguf]
"""
import argparse
import json
import os

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf.quants import dequantize, quantize

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "gguf")


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def random_k_blocks(rng, qtype, rows, cols):
    """Random bytes are valid k-quant blocks once their fp16 scales are finite."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(rows, cols // block, size), dtype=np.uint8)
    scale = rng.uniform(-0.05, 0.05, size=(rows, cols // block)).astype(np.float16).view(np.uint8).reshape(rows, -1, 2)
    if qtype == Q.Q4_K:  # d, dmin at the front
        raw[..., 0:2] = scale
        raw[..., 2:4] = scale[..., ::-1] & np.uint8(0x3B)  # a small positive-ish dmin
    elif qtype == Q.Q6_K:  # d at the end
        raw[..., size - 2:size] = scale
    return raw.reshape(rows, -1)


def write_quants(rng):
    w = gguf.GGUFWriter(os.path.join(OUT, "quants.gguf"), "test")
    w.data_alignment = 64
    w.add_uint32("general.alignment", 64)
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 0.1)
    w.add_bool("test.bool", True)
    w.add_string("test.string", "héllo wörld")
    w.add_uint64("test.u64", 2**63 + 5)
    w.add_int64("test.i64", -(2**62))
    w.add_float64("test.f64", 2.5e-300)
    w.add_array("test.array_i32", [1, -2, 3])
    w.add_array("test.array_str", ["a", "", "ü"])
    w.add_array("test.array_nested", [[1, 2], [3]])

    data = rng.standard_normal((3, 64)).astype(np.float32)
    for qtype in (Q.F32, Q.F16, Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0):
        name = qtype.name.lower()
        if qtype == Q.F32:
            q, ref = data, data
        elif qtype == Q.F16:
            q = data.astype(np.float16)
            ref = q.astype(np.float32)
        else:
            q = quantize(data, qtype)
            ref = dequantize(q, qtype).astype(np.float32)
        w.add_tensor(name, q, raw_dtype=qtype)
        w.add_tensor(name + ".ref", ref)
    for qtype in (Q.Q4_K, Q.Q6_K):
        q = random_k_blocks(rng, qtype, 2, 512)
        name = qtype.name.lower()
        w.add_tensor(name, q, raw_dtype=qtype)
        w.add_tensor(name + ".ref", dequantize(q, qtype).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def permute(weights, n_head, n_head_kv):
    """llama.cpp convert_hf_to_gguf.py LlamaModel.permute."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def llama_writer(name, layers, context, hidden, ffn, heads, kv_heads, vocab):
    """A GGUFWriter for OUT/name with a Llama's shape metadata (rope base 10000, eps 1e-5)."""
    w = gguf.GGUFWriter(os.path.join(OUT, name), "llama")
    w.add_block_count(layers)
    w.add_context_length(context)
    w.add_embedding_length(hidden)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(vocab)
    w.add_rope_dimension_count(hidden // heads)
    return w


def write_tiny_llama(rng):
    from safetensors.numpy import save_file

    hidden, heads, kv_heads, ffn, layers = 32, 4, 2, 64, 2
    head_dim = hidden // heads
    b2u = bytes_to_unicode()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    merges = ["Ġ t", "h e", "Ġt he", "i n"]
    tokens = specials + [b2u[b] for b in range(256)] + ["Ġt", "he", "Ġthe", "in"]
    types = [3] * len(specials) + [1] * (len(tokens) - len(specials))
    vocab = len(tokens)

    w = llama_writer("tiny_llama.gguf", layers, 256, hidden, ffn, heads, kv_heads, vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(0)
    w.add_pad_token_id(2)
    w.add_add_bos_token(False)
    w.add_chat_template("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}")

    hf = {}

    def put(gguf_name, hf_name, t, qtype):
        if qtype == Q.F32:
            stored, ref = t, t
        elif qtype == Q.F16:
            stored = t.astype(np.float16)
            ref = stored.astype(np.float32)
        else:
            stored = quantize(t, qtype)
            ref = dequantize(stored, qtype).astype(np.float32)
        w.add_tensor(gguf_name, stored, raw_dtype=qtype)
        hf[hf_name] = ref

    def rnd(*shape):
        return (rng.standard_normal(shape) * 0.1).astype(np.float32)

    put("token_embd.weight", "model.embed_tokens.weight", rnd(vocab, hidden), Q.Q4_0)
    for i in range(layers):
        p, h = f"blk.{i}.", f"model.layers.{i}."
        put(p + "attn_norm.weight", h + "input_layernorm.weight", 1 + rnd(hidden), Q.F32)
        q_hf, k_hf = rnd(hidden, hidden), rnd(kv_heads * head_dim, hidden)
        w.add_tensor(p + "attn_q.weight", permute(q_hf, heads, heads))
        w.add_tensor(p + "attn_k.weight", permute(k_hf, heads, kv_heads))
        hf[h + "self_attn.q_proj.weight"], hf[h + "self_attn.k_proj.weight"] = q_hf, k_hf
        put(p + "attn_v.weight", h + "self_attn.v_proj.weight", rnd(kv_heads * head_dim, hidden), Q.F16)
        put(p + "attn_output.weight", h + "self_attn.o_proj.weight", rnd(hidden, hidden), Q.BF16)
        put(p + "ffn_norm.weight", h + "post_attention_layernorm.weight", 1 + rnd(hidden), Q.F32)
        put(p + "ffn_gate.weight", h + "mlp.gate_proj.weight", rnd(ffn, hidden), Q.Q8_0)
        put(p + "ffn_up.weight", h + "mlp.up_proj.weight", rnd(ffn, hidden), Q.Q4_1)
        put(p + "ffn_down.weight", h + "mlp.down_proj.weight", rnd(hidden, ffn), Q.Q5_0)
    put("output_norm.weight", "model.norm.weight", 1 + rnd(hidden), Q.F32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    save_file(hf, os.path.join(OUT, "tiny_llama_hf.safetensors"))


def write_tiny_llama_16bit(rng):
    """tiny_llama_16bit.gguf: a tiny Llama whose matrices are all F16 or BF16 (q and k permuted
    as llama.cpp stores them), and tiny_llama_16bit_hf.safetensors, its tensors under Hugging Face
    names as F32 (the 16-bit values widened): the reader keeps F16 / BF16 tensors as they are
    stored, q / k rows unpermuted whole."""
    from safetensors.numpy import save_file

    hidden, heads, kv_heads, ffn, vocab = 32, 4, 2, 64, 48
    head_dim = hidden // heads
    w = llama_writer("tiny_llama_16bit.gguf", 1, 64, hidden, ffn, heads, kv_heads, vocab)
    hf = {}

    def rnd(*shape):
        return (rng.standard_normal(shape) * 0.1).astype(np.float32)

    def put(gguf_name, hf_name, t, qtype, heads_of_permute=None):
        stored = quantize(t, qtype)  # F16: float16 values; BF16: the raw 16-bit words
        hf[hf_name] = dequantize(stored, qtype).astype(np.float32)
        if heads_of_permute is not None:  # the rows llama.cpp's converter writes for q / k
            stored = quantize(permute(t, heads, heads_of_permute), qtype)
        w.add_tensor(gguf_name, stored, raw_dtype=qtype)

    def norm(gguf_name, hf_name):
        hf[hf_name] = 1 + rnd(hidden)
        w.add_tensor(gguf_name, hf[hf_name])

    put("token_embd.weight", "model.embed_tokens.weight", rnd(vocab, hidden), Q.F16)
    p, h = "blk.0.", "model.layers.0."
    norm(p + "attn_norm.weight", h + "input_layernorm.weight")
    put(p + "attn_q.weight", h + "self_attn.q_proj.weight", rnd(hidden, hidden), Q.F16, heads)
    put(p + "attn_k.weight", h + "self_attn.k_proj.weight", rnd(kv_heads * head_dim, hidden), Q.BF16, kv_heads)
    put(p + "attn_v.weight", h + "self_attn.v_proj.weight", rnd(kv_heads * head_dim, hidden), Q.BF16)
    put(p + "attn_output.weight", h + "self_attn.o_proj.weight", rnd(hidden, hidden), Q.F16)
    norm(p + "ffn_norm.weight", h + "post_attention_layernorm.weight")
    put(p + "ffn_gate.weight", h + "mlp.gate_proj.weight", rnd(ffn, hidden), Q.F16)
    put(p + "ffn_up.weight", h + "mlp.up_proj.weight", rnd(ffn, hidden), Q.BF16)
    put(p + "ffn_down.weight", h + "mlp.down_proj.weight", rnd(hidden, ffn), Q.F16)
    norm("output_norm.weight", "model.norm.weight")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    save_file(hf, os.path.join(OUT, "tiny_llama_16bit_hf.safetensors"))


def write_model_reference(path):
    r = gguf.GGUFReader(path)
    out = {"file": os.path.basename(path), "tensors": {}}
    for t in r.tensors:
        if t.name not in ("token_embd.weight", "blk.0.attn_q.weight", "blk.29.ffn_down.weight", "blk.3.attn_norm.weight"):
            continue
        x = dequantize(t.data, t.tensor_type).astype(np.float32)
        x = x.reshape(-1, x.shape[-1])
        out["tensors"][t.name] = {
            "type": t.tensor_type.name,
            "shape": [int(d) for d in reversed(t.shape)],
            # rows as little-endian float32 bits in hex (exact, compact)
            "first_row": x[0].astype("<f4").tobytes().hex(),
            "last_row": x[-1].astype("<f4").tobytes().hex(),
            "sum": float(x.astype(np.float64).sum()),
            "sum_abs": float(np.abs(x.astype(np.float64)).sum()),
        }
    with open(os.path.join(OUT, "smollm2_ref.json"), "w") as f:
        json.dump(out, f, separators=(",", ":"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", help="the default model's GGUF file (for smollm2_ref.json)")
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(1234)
    write_quants(rng)
    write_tiny_llama(rng)
    write_tiny_llama_16bit(np.random.default_rng(4321))  # its own generator: the files above do not move
    if args.model:
        write_model_reference(args.model)


if __name__ == "__main__":
    main()
