#!/usr/bin/env python3
"""Writes a random Llama checkpoint (Hugging Face layout, F16 safetensors, one
shard per layer) of a chosen shape: for memory and speed measurements of the
quantizer and the engine on shapes larger than the default model
(docs/qoq-quantizer.md). Default: the TinyLlama-1.1B shape (1.1B parameters).

  scripts/make_random_checkpoint.py --out /tmp/llama-1b
"""
import argparse
import json
import os

import numpy as np
from safetensors.numpy import save_file


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--intermediate", type=int, default=5632)
    p.add_argument("--layers", type=int, default=22)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    hd = a.hidden // a.heads

    def w(*shape, std=0.02):
        return (rng.standard_normal(shape, dtype=np.float32) * std).astype(np.float16)

    weight_map, shards = {}, a.layers + 1
    total = 0
    for l in range(a.layers):
        pre = f"model.layers.{l}."
        t = {
            pre + "self_attn.q_proj.weight": w(a.heads * hd, a.hidden),
            pre + "self_attn.k_proj.weight": w(a.kv_heads * hd, a.hidden),
            pre + "self_attn.v_proj.weight": w(a.kv_heads * hd, a.hidden),
            pre + "self_attn.o_proj.weight": w(a.hidden, a.heads * hd),
            pre + "mlp.gate_proj.weight": w(a.intermediate, a.hidden),
            pre + "mlp.up_proj.weight": w(a.intermediate, a.hidden),
            pre + "mlp.down_proj.weight": w(a.hidden, a.intermediate),
            pre + "input_layernorm.weight": (1 + 0.1 * rng.standard_normal(a.hidden)).astype(np.float16),
            pre + "post_attention_layernorm.weight": (1 + 0.1 * rng.standard_normal(a.hidden)).astype(np.float16),
        }
        name = f"model-{l + 1:05d}-of-{shards:05d}.safetensors"
        save_file(t, os.path.join(a.out, name), metadata={"format": "pt"})
        for k, v in t.items():
            weight_map[k] = name
            total += v.nbytes
    t = {
        "model.embed_tokens.weight": w(a.vocab, a.hidden, std=1.0),
        "model.norm.weight": np.ones(a.hidden, dtype=np.float16),
        "lm_head.weight": w(a.vocab, a.hidden),
    }
    name = f"model-{shards:05d}-of-{shards:05d}.safetensors"
    save_file(t, os.path.join(a.out, name), metadata={"format": "pt"})
    for k, v in t.items():
        weight_map[k] = name
        total += v.nbytes
    with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": a.hidden,
        "intermediate_size": a.intermediate, "num_hidden_layers": a.layers, "num_attention_heads": a.heads,
        "num_key_value_heads": a.kv_heads, "vocab_size": a.vocab, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "max_position_embeddings": 2048, "tie_word_embeddings": False, "torch_dtype": "float16",
        "hidden_act": "silu", "bos_token_id": 1, "eos_token_id": 2,
    }
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    params = total // 2
    print(f"wrote {a.out}: {params / 1e9:.3f}B parameters, {total / 2**30:.2f} GiB F16")


if __name__ == "__main__":
    main()
