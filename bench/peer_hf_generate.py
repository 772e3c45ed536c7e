#!/usr/bin/env python3
"""The peer run of the throughput table: Hugging Face transformers FP16
`generate` on the same GPU, with random weights of the same shapes as
`qserve bench throughput --load-format dummy --arch A` (built from a config,
nothing downloaded), the same input / output lengths, EOS ignored
(min_new_tokens = max_new_tokens), and the largest batch that fits: batch
sizes are tried from an estimate of what memory holds downwards, an
out-of-memory error moves to the next smaller one. One batch of random
prompts is one `generate` call; throughput = batch * output_len / its wall time.

  python3 bench/peer_hf_generate.py --arch llama-3-8b --input-len 1024 --output-len 512 --json
  python3 bench/peer_hf_generate.py --arch tiny --device cpu --dtype float32 --input-len 32 --output-len 8 --json

Prints one JSON line (with --json) like qserve's: output_tokens_per_s, batch, arch, ...
"""
import argparse
import json
import math
import sys
import time

# The shapes of src/engine/dummy_arch.cpp (the models' config.json values):
# hidden, layers, heads, kv heads, intermediate, vocab, rope theta, context. tests/e2e/test_peer_arch_table.py
# checks the two agree.
ARCHS = {
    "llama-2-7b": (4096, 32, 32, 32, 11008, 32000, 10000.0, 4096),
    "llama-2-13b": (5120, 40, 40, 40, 13824, 32000, 10000.0, 4096),
    "llama-2-70b": (8192, 80, 64, 8, 28672, 32000, 10000.0, 4096),
    "llama-3-8b": (4096, 32, 32, 8, 14336, 128256, 500000.0, 8192),
    "llama-3-70b": (8192, 80, 64, 8, 28672, 128256, 500000.0, 8192),
    "llama-3.2-1b": (2048, 16, 32, 8, 8192, 128256, 500000.0, 8192),
    "llama-3.2-3b": (3072, 28, 24, 8, 8192, 128256, 500000.0, 8192),
    "tiny": (256, 2, 2, 1, 512, 1024, 10000.0, 2048),
    "tiny-odd": (200, 3, 5, 1, 328, 999, 10000.0, 512),
}


def llama_config(arch):
    from transformers import LlamaConfig

    hidden, layers, heads, kv_heads, inter, vocab, theta, ctx = ARCHS[arch]
    return LlamaConfig(
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=hidden // heads,
        intermediate_size=inter,
        vocab_size=vocab,
        rope_theta=theta,
        max_position_embeddings=ctx,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )


def kv_bytes_per_seq(arch, tokens, dtype_bytes):
    hidden, layers, heads, kv_heads, _, _, _, _ = ARCHS[arch]
    return 2 * layers * kv_heads * (hidden // heads) * tokens * dtype_bytes


def weight_bytes_estimate(arch, dtype_bytes):
    hidden, layers, heads, kv_heads, inter, vocab, _, _ = ARCHS[arch]
    head_dim = hidden // heads
    per_layer = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim + 3 * hidden * inter + 2 * hidden
    return (layers * per_layer + 2 * vocab * hidden + hidden) * dtype_bytes


def is_oom(e):
    import torch

    return isinstance(e, torch.cuda.OutOfMemoryError) or "out of memory" in str(e).lower()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", required=True, choices=sorted(ARCHS))
    ap.add_argument("--input-len", type=int, default=1024)
    ap.add_argument("--output-len", type=int, default=512)
    ap.add_argument("--device", default="cuda", help="cuda | cpu")
    ap.add_argument("--dtype", default="float16", help="float16 | bfloat16 | float32")
    ap.add_argument("--memory-budget", type=float, default=0,
                    help="emulate a card of this many bytes (torch.cuda.set_per_process_memory_fraction)")
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.9,
                    help="fraction of the card the batch estimate plans for")
    ap.add_argument("--batch-sizes", default="auto",
                    help="comma-separated sizes to try, largest first; auto: from the memory estimate down")
    ap.add_argument("--max-batch", type=int, default=1024)
    ap.add_argument("--cache", default="dynamic", help="dynamic (generate's default) | static")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    import torch
    import transformers
    from transformers import LlamaForCausalLM

    dtype = getattr(torch, a.dtype)
    dtype_bytes = torch.tensor([], dtype=dtype).element_size()
    torch.manual_seed(a.seed)
    config = llama_config(a.arch)
    if a.input_len + a.output_len > config.max_position_embeddings:
        sys.exit(f"--input-len + --output-len exceed the context of {config.max_position_embeddings}")
    cuda = a.device.startswith("cuda")
    card = 0
    if cuda:
        total = torch.cuda.get_device_properties(0).total_memory
        card = int(a.memory_budget) if a.memory_budget > 0 else total
        if card < total:
            torch.cuda.set_per_process_memory_fraction(card / total)

    if cuda and weight_bytes_estimate(a.arch, dtype_bytes) >= card * a.gpu_memory_utilization:
        result = {"bench": "peer_hf_generate", "arch": a.arch, "precision": a.dtype, "memory_budget": card,
                  "error": f"weights do not fit ({weight_bytes_estimate(a.arch, dtype_bytes) / 1e9:.1f} GB of "
                           f"{card * a.gpu_memory_utilization / 1e9:.1f} GB)"}
        print(json.dumps(result) if a.json else result)
        return 1

    t0 = time.perf_counter()
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(a.device):
            model = LlamaForCausalLM(config)  # random init, made on the device in `dtype`
    except Exception as e:  # noqa: BLE001
        if cuda and is_oom(e):
            result = {"bench": "peer_hf_generate", "arch": a.arch, "error": "weights do not fit", "memory_budget": card}
            print(json.dumps(result) if a.json else result)
            return 1
        raise
    finally:
        torch.set_default_dtype(old)
    model.eval()
    load_s = time.perf_counter() - t0
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())

    # Largest batch first: what the budget leaves after the weights, over the
    # KV cache of one sequence plus its share of prefill activations.
    if a.batch_sizes != "auto":
        sizes = sorted({int(s) for s in a.batch_sizes.split(",")}, reverse=True)
    else:
        if cuda:
            free = card * a.gpu_memory_utilization - torch.cuda.memory_allocated()
            per_seq = kv_bytes_per_seq(a.arch, a.input_len + a.output_len, dtype_bytes)
            # prefill activations of one sequence: hidden states, q/k/v, gate/up/act of the MLP (with slack)
            per_seq += a.input_len * (8 * config.hidden_size + 4 * config.intermediate_size) * dtype_bytes
            start = max(1, min(a.max_batch, int(free // per_seq)))
        else:
            start = min(a.max_batch, 8)
        sizes, b = [], start
        while b >= 1:
            sizes.append(b)
            b = b * 3 // 4 if b > 4 else b - 1
    gen = torch.Generator(device="cpu").manual_seed(a.seed)
    tried = []
    import gc

    for b in sizes:
        oom = False
        ids = torch.randint(256, config.vocab_size, (b, a.input_len), generator=gen).to(a.device)
        mask = torch.ones_like(ids)
        kwargs = dict(attention_mask=mask, do_sample=False, max_new_tokens=a.output_len, min_new_tokens=a.output_len,
                      pad_token_id=0)
        if a.cache != "dynamic":
            kwargs["cache_implementation"] = a.cache
        try:
            with torch.inference_mode():
                model.generate(ids[:, :8], **dict(kwargs, max_new_tokens=2, min_new_tokens=2))  # warm-up
                if cuda:
                    torch.cuda.synchronize()
                t = time.perf_counter()
                out = model.generate(ids, **kwargs)
                if cuda:
                    torch.cuda.synchronize()
                wall = time.perf_counter() - t
        except Exception as e:  # noqa: BLE001
            if not (cuda and is_oom(e)):
                raise
            oom = True
        if oom:  # outside the except block: the traceback's frames (and their tensors) are gone
            tried.append({"batch": b, "oom": True})
            del ids, mask
            gc.collect()
            torch.cuda.empty_cache()
            continue
        generated = (out.shape[1] - a.input_len) * b
        assert out.shape[1] - a.input_len == a.output_len, "EOS must not stop generation"
        result = {
            "bench": "peer_hf_generate",
            "framework": f"transformers {transformers.__version__}, torch {torch.__version__}",
            "arch": a.arch,
            "precision": a.dtype,
            "device": torch.cuda.get_device_name(0) if cuda else "cpu",
            "input_len": a.input_len,
            "output_len": a.output_len,
            "batch": b,
            "num_prompts": b,
            "memory_budget": card,
            "weight_bytes": weight_bytes,
            "cache": a.cache,
            "load_s": load_s,
            "wall_s": wall,
            "output_tokens": generated,
            "output_tokens_per_s": generated / wall,
            "peak_memory_bytes": torch.cuda.max_memory_allocated() if cuda else 0,
            "tried": tried + [{"batch": b, "oom": False}],
        }
        if a.json:
            print(json.dumps(result), flush=True)
        else:
            print(f"{a.arch} {a.dtype} batch {b}: {result['output_tokens_per_s']:.1f} output tokens/s "
                  f"({generated} tokens in {wall:.2f} s)")
        return 0
    result = {"bench": "peer_hf_generate", "arch": a.arch, "error": "no batch size fits", "tried": tried,
              "memory_budget": card}
    print(json.dumps(result) if a.json else result)
    return 1


if __name__ == "__main__":
    sys.exit(main())
