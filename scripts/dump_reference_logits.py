#!/usr/bin/env python3
"""Reference logits of Hugging Face transformers (FP32, CPU) for the forward-pass tests.

  scripts/dump_reference_logits.py tiny            # makes tests/data/models/tiny-{llama,mistral,qwen2}
                                                   # and tests/data/forward/tiny-*.json
  scripts/dump_reference_logits.py model DIR NAME  # a real model directory (e.g. the default model)
                                                   # -> tests/data/forward/NAME.json

The tiny models are random but deterministic (fixed seeds), odd-sized (hidden 72,
3 layers, 6 query / 2 KV heads of 12, vocab 300), stored in FP16 so that each is
well under 300 KB; the reference runs them in FP32 on the FP16-rounded weights, so
our reader (FP16 -> FP32) computes on exactly the same numbers.

The JSON holds, for each prompt (token ids): per position the top-20 logits (ids
and values) and max |logit|; and the greedy 32-token continuation with, per
step, the gap between the two best logits (a near tie may be skipped by a test).
"""
import argparse
import json
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOP_K = 20
CONTINUATION = 32


def tiny_configs():
    from transformers import LlamaConfig, MistralConfig, Qwen2Config

    common = dict(vocab_size=300, hidden_size=72, intermediate_size=80, num_hidden_layers=3,
                  num_attention_heads=6, num_key_value_heads=2, head_dim=12, max_position_embeddings=128,
                  rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=2)
    llama = LlamaConfig(**common, tie_word_embeddings=True,
                        rope_scaling={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                                      "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                      "original_max_position_embeddings": 32})
    mistral = MistralConfig(**common, tie_word_embeddings=False, sliding_window=None, rope_theta=1000.0)
    qwen2 = Qwen2Config(**common, tie_word_embeddings=False, use_sliding_window=False, rope_theta=10000.0)
    for c, arch in ((llama, "LlamaForCausalLM"), (mistral, "MistralForCausalLM"), (qwen2, "Qwen2ForCausalLM")):
        c.architectures = [arch]
    return {"tiny-llama": llama, "tiny-mistral": mistral, "tiny-qwen2": qwen2}


def randomize(model, seed):
    """Weights that give peaked, well-separated logits (the default init's are nearly flat)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                v = 1.0 + 0.2 * torch.randn(p.shape, generator=g)
            elif name.endswith(".bias"):
                v = 0.3 * torch.randn(p.shape, generator=g)
            elif "embed_tokens" in name:
                # tied: a small embedding keeps the last token's own row from dominating its logits
                # (which would make greedy continuations repeat one token)
                v = (0.3 if model.config.tie_word_embeddings else 1.0) * torch.randn(p.shape, generator=g)
            elif name == "lm_head.weight":
                v = 3.0 * torch.randn(p.shape, generator=g) / p.shape[1] ** 0.5
            else:  # projections: unit-variance outputs
                v = 1.2 * torch.randn(p.shape, generator=g) / p.shape[1] ** 0.5
            p.copy_(v.half().float())  # FP16-representable: the saved file holds exactly these


@torch.no_grad()
def reference(model, prompts):
    out = []
    for ids in prompts:
        logits = model(torch.tensor([ids])).logits[0].float()  # [n, V]
        top = torch.topk(logits, TOP_K, dim=-1)
        positions = [{"ids": top.indices[i].tolist(),
                      "logits": [float(f"{v:.7g}") for v in top.values[i].tolist()],
                      "max_abs": float(f"{logits[i].abs().max().item():.7g}")} for i in range(len(ids))]
        seq = list(ids)
        greedy, gaps = [], []
        for _ in range(CONTINUATION):  # full recompute each step: no cache involved in the reference
            last = model(torch.tensor([seq])).logits[0, -1].float()
            t2 = torch.topk(last, 2)
            greedy.append(int(t2.indices[0]))
            gaps.append(float(f"{(t2.values[0] - t2.values[1]).item():.4g}"))
            seq.append(int(t2.indices[0]))
        out.append({"prompt": list(ids), "positions": positions, "greedy": greedy, "greedy_gaps": gaps})
    return out


def write(path, payload):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(payload, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {os.path.relpath(path, ROOT)} ({os.path.getsize(path)} bytes)")


def dump_tiny():
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    for i, (name, config) in enumerate(tiny_configs().items()):
        model_cls = AutoModelForCausalLM.from_config(config).__class__
        model = model_cls(config).float().eval()
        randomize(model, seed=100 + i)
        model_dir = os.path.join(ROOT, "tests", "data", "models", name)
        model.to(torch.float16).save_pretrained(model_dir, safe_serialization=True)
        model.float()
        for extra in ("generation_config.json",):  # not needed by the tests
            p = os.path.join(model_dir, extra)
            if os.path.exists(p):
                os.remove(p)
        # Reload from disk, as a user would: the reference comes from the saved files.
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
        g = torch.Generator().manual_seed(7 + i)
        prompts = [torch.randint(3, config.vocab_size, (n,), generator=g).tolist() for n in (1, 9, 30)]
        write(os.path.join(ROOT, "tests", "data", "forward", f"{name}.json"),
              {"model": name, "architecture": config.architectures[0], "top_k": TOP_K,
               "transformers": __import__("transformers").__version__, "prompts": reference(model, prompts)})


def dump_model(model_dir, name):
    from tokenizers import Tokenizer
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    texts = ["The capital of France is",
             "<|im_start|>user\nWrite a haiku about the sea.<|im_end|>\n<|im_start|>assistant\n",
             "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"]
    prompts = [tok.encode(t, add_special_tokens=False).ids for t in texts]
    write(os.path.join(ROOT, "tests", "data", "forward", f"{name}.json"),
          {"model": name, "architecture": model.config.architectures[0], "top_k": TOP_K,
           "transformers": __import__("transformers").__version__, "texts": texts,
           "prompts": reference(model, prompts)})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    sub.add_parser("tiny")
    m = sub.add_parser("model")
    m.add_argument("dir")
    m.add_argument("name")
    args = ap.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    if args.what == "tiny":
        dump_tiny()
    else:
        dump_model(args.dir, args.name)


if __name__ == "__main__":
    sys.exit(main())
