"""PyTorch SDPA causal prefill on the GPU: the reference point for
bench_attention --prefill (same shapes, same FLOP count: 2 x 2 x b x h x s^2 x d / 2).

FP16, contiguous [b, h, s, d] tensors, K/V expanded to the query heads (what
SDPA's flash backend takes), median of 5 batches of 10 launches (CUDA events).
Usage: python3 bench/sdpa_prefill_anchor.py [--json FILE]
"""
import argparse
import json

import torch
import torch.nn.functional as F


def time_us(fn, per_batch=10, batches=5):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(batches):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(per_batch):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000.0 / per_batch)
    return sorted(times)[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    cases = [(8, 1024, 32, 128), (32, 1024, 32, 128), (1, 4096, 32, 128), (4, 2048, 32, 128), (8, 1024, 32, 64)]
    rows = []
    print("| batch x seq | heads | d | SDPA us | SDPA TFLOP/s |\n|---|---|---|---|---|")
    for b, s, h, d in cases:
        q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.float16) for _ in range(3))
        us = time_us(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
        tf = 2.0 * 2.0 * b * h * s * s * d / 2.0 / (us * 1e-6) / 1e12
        rows.append({"op": "sdpa_prefill", "batch": b, "seq": s, "heads": h, "d": d, "us": us, "tflops": tf})
        print(f"| {b} x {s} | {h} | {d} | {us:.0f} | {tf:.0f} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(), "results": rows}, f, indent=1)


if __name__ == "__main__":
    main()
