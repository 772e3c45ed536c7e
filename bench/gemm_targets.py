#!/usr/bin/env python3
"""Target verdicts of the W4A8 GEMM issues from a `bench_gemm --json` file.

Usage: bench/gemm_targets.py GEMM.json [--column shipped|no_pdl|policy|interleaved|soak] [--short]

GEMM.json: what `bench_gemm --json` wrote (a list of rows), or a results
file of bench/results/ (one JSON record a line): there every record with
"record": "table" gets a table of its own, headed by its gpu, build and pass.
--short: after each table, the rows short of a target (plan and ratio).

Columns: `shipped` = the top-level plan as launched by that binary,
`no_pdl` = the same plan without programmatic dependent launch, `policy` =
the wgmma plans with PDL and the mma.sync plans without (what the engine
launches from commit of round 3 on; a row whose plan the measured table
moved to the wgmma family takes the wgmma column), `interleaved` = the
shipped plans' medians of `bench_gemm --interleave` against cuBLASLt's in
the same rounds, `soak` = each kernel alone at the board's power cap
(`bench_gemm --soak-ms`, the time at the end of its soak). Ratios are
cuBLASLt INT8 time / our time, from the same run (for `interleaved` and
`soak` cuBLASLt's time of the same kind); rows without the column's
timings (0 or absent) are left out.
"""
import argparse
import json
import statistics
import sys

TARGETS = [  # (issue, kind, label, predicate on m, target)
    (8, "per_channel", "m >= 1024", lambda m: m >= 1024, 1.0),
    (8, "per_channel", "m = 256", lambda m: m == 256, 1.3),
    (8, "per_channel", "m <= 64", lambda m: m <= 64, 2.2),
    (8, "g128", "m >= 1024", lambda m: m >= 1024, 0.9),
    (8, "g128", "m = 256", lambda m: m == 256, 1.2),
    (8, "g128", "m <= 64", lambda m: m <= 64, 2.0),
    (4, "per_channel", "m <= 64", lambda m: m <= 64, 1.8),
    (4, "per_channel", "m >= 1024", lambda m: m >= 1024, 0.9),
    (4, "g128", "m <= 64", lambda m: m <= 64, 1.6),
    (4, "g128", "m >= 1024", lambda m: m >= 1024, 0.8),
]

# Rows whose shipped plan changed after the run (measured table): (model, layer, m, kind) -> use the wgmma column.
MOVED_TO_WGMMA = {("70b", "down", 16, "per_channel"), ("70b", "down", 32, "per_channel")}


def baseline_of(row, column):
    """cuBLASLt INT8's time for the column's kind of timing."""
    if column == "interleaved":
        return row.get("interleaved_int8_us", 0)
    if column == "soak":
        return row.get("soak_int8_us", 0)
    return row["cublaslt_int8_us"]


def time_of(row, kind, column):
    if column == "interleaved":
        return row.get(f"interleaved_{kind}_us", 0)
    if column == "soak":
        return row.get(f"soak_{kind}_us", 0)
    if column == "shipped":
        return row[f"shipped_{kind}_us"]
    if column == "no_pdl":
        return row[f"shipped_{kind}_no_pdl_us"]
    if (row["model"], row["layer"], row["m"], kind) in MOVED_TO_WGMMA:
        return row[f"wgmma_{kind}_us"]
    wgmma = row[f"shipped_{kind}_plan"].startswith("wg")
    return row[f"shipped_{kind}_us"] if wgmma else row[f"shipped_{kind}_no_pdl_us"]


def tables_of(path):
    """(heading, rows) for a bench_gemm --json list, or for each table record of a results file."""
    text = open(path).read()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:  # one record a line
        data = [json.loads(line) for line in text.splitlines() if line.strip()]
    if isinstance(data, dict):
        data = [data]
    if data and all("record" in r for r in data):
        return [(f"{r.get('gpu', '?')}, {r.get('build', '?')}, pass {r.get('pass', '?')}", r["rows"])
                for r in data if r.get("record") == "table"]
    return [(None, data)] if data else []


def verdict_table(rows, column, short):
    print(f"| issue | kind | m | target | {column}: min / median / max | rows met | verdict | worst row |")
    print("|---|---|---|---|---|---|---|---|")
    short_rows = []  # (issue, kind label, target label, row, ratio, kind): the rows below a target
    for issue, kind, label, pred, target in TARGETS:
        sel = [r for r in rows if pred(r["m"]) and time_of(r, kind, column) and baseline_of(r, column)]
        ratios = [(baseline_of(r, column) / time_of(r, kind, column), r) for r in sel]
        if not ratios:
            continue
        vals = [x for x, _ in ratios]
        met = sum(x >= target for x in vals)
        worst = min(ratios, key=lambda t: t[0])[1]
        name = "per-channel" if kind == "per_channel" else "g128"
        print(f"| {issue} | {name} | {label} | >= {target}x | {min(vals):.2f}x / {statistics.median(vals):.2f}x / "
              f"{max(vals):.2f}x | {met} of {len(vals)} | {'met' if met == len(vals) else 'not met'} | "
              f"{worst['model']} {worst['layer']} m={worst['m']} |")
        short_rows += [(issue, name, f"{label} >= {target}x", r, x, kind) for x, r in ratios if x < target]
    if not short:
        return
    print()
    print("| issue | kind | target | row | plan | ratio |")
    print("|---|---|---|---|---|---|")
    for issue, name, target, r, x, kind in short_rows:
        print(f"| {issue} | {name} | {target} | {r['model']} {r['layer']} m={r['m']} | "
              f"{r.get(f'shipped_{kind}_plan', '?')} | {x:.3f}x |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("path", help="bench_gemm --json output, or a results file of bench/results/")
    ap.add_argument("--column", default="policy", choices=["shipped", "no_pdl", "policy", "interleaved", "soak"])
    ap.add_argument("--short", action="store_true", help="after each table, the rows short of a target")
    args = ap.parse_args()
    try:
        tables = tables_of(args.path)
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"{args.path}: {e}")
    if not tables:
        sys.exit(f"{args.path}: no table rows")
    for i, (heading, rows) in enumerate(tables):
        if heading is not None:
            print(("\n" if i else "") + f"## {heading}\n")
        verdict_table(rows, args.column, args.short)


if __name__ == "__main__":
    main()
