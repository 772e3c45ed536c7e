#!/usr/bin/env python3
"""Where a run's slow engine steps fall: the device time of each step from `qserve bench throughput
--json` under QSERVE_STEP_TIMING=steps (`device_busy_us_steps`, in step order).

Usage:
  bench/step_series.py RUNS.jsonl [RUNS.jsonl ...] [--field v] [--slow 1.10] [--period 16]

Per run (one JSON line with the series; --field names the build or setting, as the device scripts
add it): the decode steps' median and mean, how many steps are slow (above --slow x the median)
and what share of the run's decode time they add over the median, the slow steps' indices, their
count by index modulo --period (16: the KV page size, so a slow step every page boundary shows as
one bucket), and the mean of each quarter of the run (the context grows from one to the next).
Steps above 5x the median are left out of the decode figures and counted apart (the prefill step
and a warm-up). Then per side: the runs' medians and means, and each side's ratio to the first side
(time ratios: below 1 is faster). A median that drops while the mean rises is a tail of slow steps.
"""
import argparse
import json
import statistics
import sys
from collections import Counter, defaultdict

OUTLIER = 5.0  # x the median: the prefill step, a warm-up


def analyse(busy, slow, period):
    """Figures of one series (microseconds, in step order)."""
    med_all = statistics.median(busy)
    steps = [(i, b) for i, b in enumerate(busy) if b <= OUTLIER * med_all]
    outliers = len(busy) - len(steps)
    values = [b for _, b in steps]
    med = statistics.median(values)
    mean = statistics.fmean(values)
    slow_steps = [(i, b) for i, b in steps if b > slow * med]
    excess = sum(b - med for _, b in slow_steps)
    q = max(len(values) // 4, 1)
    quarters = [statistics.fmean(values[k * q:(k + 1) * q]) for k in range(4) if values[k * q:(k + 1) * q]]
    return {
        "steps": len(values), "outliers": outliers, "median": med, "mean": mean,
        "slow": len(slow_steps), "slow_share": excess / sum(values) if values else 0.0,
        "slow_index": [i for i, _ in slow_steps],
        "slow_mod": Counter(i % period for i, _ in slow_steps),
        "quarters": quarters,
    }


def load(paths, field):
    runs = []
    for p in paths:
        for line in open(p):
            line = line.strip()
            if not line.startswith("{"):
                continue
            d = json.loads(line)
            series = d.get("device_busy_us_steps")
            if not series:
                continue
            runs.append((str(d.get(field, "-")), d, series))
    return runs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--field", default="v", help="the JSON field naming the side (default v)")
    ap.add_argument("--slow", type=float, default=1.10, help="a slow step: above this x the median (default 1.10)")
    ap.add_argument("--period", type=int, default=16, help="slow steps counted by index modulo this (default 16)")
    args = ap.parse_args(argv)
    runs = load(args.files, args.field)
    if not runs:
        sys.exit("no line with device_busy_us_steps (run with QSERVE_STEP_TIMING=steps)")
    print(f"| side | arch | precision | seqs | decode tok/s | steps (+ outliers) | median us | mean us | "
          f"slow (> {args.slow:.2f}x) | their share | quarter means us |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    by_side = defaultdict(list)
    notes = []
    for side, d, series in runs:
        a = analyse(series, args.slow, args.period)
        by_side[side].append(a)
        tok = d.get("decode_tokens_per_s")
        tok_s = f"{tok:,.0f}" if tok is not None else "-"
        quarters = " / ".join(f"{x:.0f}" for x in a["quarters"])
        print(f"| {side} | {d.get('arch', '-')} | {d.get('precision', '-')} | {d.get('max_num_seqs', '-')} | {tok_s} | "
              f"{a['steps']} (+{a['outliers']}) | {a['median']:.0f} | {a['mean']:.0f} | {a['slow']} | "
              f"{100 * a['slow_share']:.1f}% | {quarters} |")
        if a["slow"]:
            mods = ", ".join(f"{k}: {n}" for k, n in sorted(a["slow_mod"].items()))
            first = ", ".join(str(i) for i in a["slow_index"][:24])
            more = " ..." if len(a["slow_index"]) > 24 else ""
            notes.append(f"{side}: slow steps at {first}{more}; by index mod {args.period}: {mods}")
    print()
    for n in notes:
        print(n)
    sides = list(by_side)
    base = sides[0]
    med0 = statistics.fmean(a["median"] for a in by_side[base])
    mean0 = statistics.fmean(a["mean"] for a in by_side[base])
    print()
    print(f"| side | runs | median us | mean us | median / {base} | mean / {base} |")
    print("|---|---|---|---|---|---|")
    for s in sides:
        med = statistics.fmean(a["median"] for a in by_side[s])
        mean = statistics.fmean(a["mean"] for a in by_side[s])
        print(f"| {s} | {len(by_side[s])} | {med:.1f} | {mean:.1f} | {med / med0:.4f} | {mean / mean0:.4f} |")


if __name__ == "__main__":
    main()
