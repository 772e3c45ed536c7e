#!/usr/bin/env python3
"""A against B: two builds (or settings) timed in the same device call, passes interleaved (A B B A).

Usage:
  bench/ab_compare.py gemm --a A1.json[,A2.json ...] --b B1.json[,B2.json ...] [--names A,B] [--only-over F]
  bench/ab_compare.py engine RUNS.jsonl [RUNS.jsonl ...] --a A --b B [--field v] [--metric decode_tokens_per_s]

gemm: `bench_gemm --json` files, one per pass. Per layer, m and kind (per-channel, g128): the shipped
plan (a row whose plan differs between A and B is marked), each side's passes, the ratio of B's
mean time to A's, and both against cuBLASLt INT8 (the mean of its time over every pass of both
sides, all timed in the same process as ours). Then the issue targets of bench/gemm_targets.py,
counted for each side on the rows the files cover (the shipped times). --only-over F keeps the rows
whose ratio differs from 1 by more than F (the summary still counts every row).

engine: JSON lines of `qserve bench throughput --json` (with --sweep: one per max_num_seqs) with a
field naming the build (`--field`, default "v", as the device scripts add it). Per arch, precision
and max_num_seqs: each side's runs of the metric, the ratio of B's mean to A's (higher is better
for tokens per second) and whether the two sides' runs are apart: "B above" when every B run is
above every A run, "B below" when every one is below, else "overlap" (a ratio whose runs overlap
is within the runs' spread). Lines without max_num_seqs (a sweep's summary) are skipped. A warning
follows the table when the sides ran with different warm-ups (`warmup_runs`; lines without it are
cold first runs, as every run before round 55).
"""
import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gemm_targets import TARGETS  # noqa: E402  (issue, kind, label, predicate on m, target)

KINDS = {"per_channel": "per-channel", "g128": "g128"}  # JSON key part -> label


def load_gemm(paths):
    """One dict per pass: (model, layer, m) -> row."""
    passes = []
    for p in paths:
        rows = json.load(open(p))
        passes.append({(r["model"], r["layer"], r["m"]): r for r in rows})
    return passes


def gemm(args):
    a = load_gemm(args.a.split(","))
    b = load_gemm(args.b.split(","))
    name_a, name_b = args.names.split(",")
    keys = [k for k in a[0] if all(k in d for d in a + b)]
    out = []
    for key in keys:
        for kind, label in KINDS.items():
            ta = [d[key][f"shipped_{kind}_us"] for d in a]
            tb = [d[key][f"shipped_{kind}_us"] for d in b]
            if not all(ta) or not all(tb):
                continue
            plan_a, plan_b = a[0][key][f"shipped_{kind}_plan"], b[0][key][f"shipped_{kind}_plan"]
            int8 = statistics.mean(d[key]["cublaslt_int8_us"] for d in a + b)
            out.append({"model": key[0], "layer": key[1], "m": key[2], "kind": kind, "label": label,
                        "plan_a": plan_a, "plan_b": plan_b, "a": ta, "b": tb,
                        "ratio": statistics.mean(tb) / statistics.mean(ta),
                        "x_a": int8 / statistics.mean(ta), "x_b": int8 / statistics.mean(tb)})
    print(f"| layer | m | kind | plan | {name_a} us | {name_b} us | {name_b} / {name_a} | "
          f"x cuBLASLt INT8 {name_a} -> {name_b} |")
    print("|---|---|---|---|---|---|---|---|")
    for r in out:
        if abs(r["ratio"] - 1) <= args.only_over:
            continue
        plan = f"`{r['plan_a']}`" if r["plan_a"] == r["plan_b"] else f"`{r['plan_a']}` -> `{r['plan_b']}` (differ)"
        print(f"| {r['model']} {r['layer']} | {r['m']} | {r['label']} | {plan} | "
              f"{' / '.join('%.2f' % t for t in r['a'])} | {' / '.join('%.2f' % t for t in r['b'])} | "
              f"{r['ratio']:.3f} | {r['x_a']:.2f} -> {r['x_b']:.2f} |")
    ratios = [r["ratio"] for r in out]
    if ratios:
        print(f"\n{len(ratios)} rows: {name_b} / {name_a} median {statistics.median(ratios):.3f}, "
              f"min {min(ratios):.3f}, max {max(ratios):.3f}; within 1.5%: "
              f"{sum(abs(x - 1) <= 0.015 for x in ratios)}")
    print(f"\n| issue | kind | m | target | {name_a} | {name_b} |")
    print("|---|---|---|---|---|---|")
    for issue, kind, label, pred, target in TARGETS:
        sel = [r for r in out if r["kind"] == kind and pred(r["m"])]
        if not sel:
            continue
        met_a = sum(r["x_a"] >= target for r in sel)
        met_b = sum(r["x_b"] >= target for r in sel)
        print(f"| {issue} | {KINDS[kind]} | {label} | >= {target}x | {met_a} of {len(sel)} | {met_b} of {len(sel)} |")


def engine(args):
    runs = defaultdict(list)  # (arch, precision, seqs, build) -> metric values
    warmups = defaultdict(set)  # build -> warmup_runs values ("cold" where the line has none: before round 55)
    for path in args.files:
        for line in open(path):
            line = line.strip()
            if not line:
                continue
            x = json.loads(line)
            if "max_num_seqs" not in x or args.field not in x:
                continue
            runs[(x.get("arch", x.get("model", "")), x.get("precision", ""), x["max_num_seqs"], x[args.field])].append(
                x[args.metric])
            warmups[x[args.field]].add(x.get("warmup_runs", "cold"))
    groups = sorted({k[:3] for k in runs})
    print(f"| arch | precision | sequences | {args.a} | {args.b} | {args.b} / {args.a} | runs |")
    print("|---|---|---|---|---|---|---|")
    for arch, precision, seqs in groups:
        va, vb = runs.get((arch, precision, seqs, args.a)), runs.get((arch, precision, seqs, args.b))
        if not va or not vb:
            continue
        ratio = statistics.mean(vb) / statistics.mean(va)
        apart = "B above" if min(vb) > max(va) else "B below" if max(vb) < min(va) else "overlap"
        print(f"| {arch} | {precision} | {seqs} | {' / '.join('%.0f' % v for v in va)} | "
              f"{' / '.join('%.0f' % v for v in vb)} | {ratio:.4f} | {apart} |")
    wa, wb = warmups.get(args.a, set()), warmups.get(args.b, set())
    if wa and wb and wa != wb:
        def show(w):
            return ", ".join(sorted(str(v) for v in w))
        print(f"warning: the sides ran with different warm-ups ({args.a}: {show(wa)}; {args.b}: {show(wb)} untimed runs "
              f"first): a cold run counts its shape's one-time costs (lazy kernel loading, graph capture)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gemm")
    g.add_argument("--a", required=True)
    g.add_argument("--b", required=True)
    g.add_argument("--names", default="A,B")
    g.add_argument("--only-over", type=float, default=-1.0)
    e = sub.add_parser("engine")
    e.add_argument("files", nargs="+")
    e.add_argument("--a", required=True)
    e.add_argument("--b", required=True)
    e.add_argument("--field", default="v")
    e.add_argument("--metric", default="decode_tokens_per_s")
    args = ap.parse_args()
    if args.cmd == "gemm":
        if len(args.names.split(",")) != 2:
            ap.error("--names wants two names, A,B")
        gemm(args)
    else:
        engine(args)


if __name__ == "__main__":
    main()
