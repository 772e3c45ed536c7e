#!/usr/bin/env python3
"""Entries of the W4A8 measured plan table from `bench_gemm --sweep` output.

Usage: bench/gemm_table_refit.py SWEEP.txt [SWEEP.txt ...] [--neighbor NSWEEP.txt ...] [--repo DIR]
       [--shipped JSON ...] [--neighbor-shipped NJSON ...]
       [--margin 0.02] [--max-loss M] [--all] [--overrides]

Reads the "sweep" lines that `bench_gemm --sweep` / `--sweep-tiles` print (one per layer, kind
and m: every tile/split timed), and prints one line of `kTable` in
src/backend/cuda/gemm_w4a8_measured.cpp per (layer, m bucket) that the sweeps cover for both kinds:

    {N, K, BUCKET, P("NAME/S"), P("NAME/S")},  // pc NAME/S T; g128 NAME/S T

- bucket 1 (m = 1..8) is chosen by the mean of the m = 1 and m = 8 rows when both were swept;
  the other buckets (kW4A8MBuckets of gemm_w4a8_measured.h) by their own m;
- a split is kept only if the planner reproduces it (ceil(kt / ceil(kt / s)) == s with kt the
  number of 128-wide k blocks), since the planner recomputes the split count; stream-K ("sk")
  always;
- with an existing entry for the same (layer, bucket) in the table, its choice stays unless the
  sweep measured it and the best is faster by more than --margin (default 2%); --all prints every
  covered (layer, bucket) anyway, marking unchanged ones.

The table names its plans as the sweeps do ("NAME/SPLITS", looked up when it compiles); the tile
list is kW4A8TileNames of src/backend/cuda/gemm_w4a8_tile_names.h, and a sweep's plan of a tile
not in it is not a candidate. Several files may be given (the same row in two runs: the mean).

The model's pattern: `--neighbor FILE...` takes sweeps run with `bench_gemm --neighbor-us 5`
(each launch after a kernel that holds every SM, as a model's GEMMs follow other kernels; the
positional sweeps are then the back-to-back ones). A choice is then the fastest after the
neighbor among the plans both kinds of sweep timed, and it replaces an existing entry only if it
is faster than the entry by more than --margin after the neighbor and slower by at most
--max-loss (default: --margin) back to back (round 21 of docs/gemm-hopper.md: the two patterns
disagree on a third of the decode candidates). Run the result in the engine before keeping it:

`--overrides` prints the changed choices as one QSERVE_W4A8_PLANS value (gemm_w4a8_overrides.h)
instead of table lines, for `qserve bench throughput` with and without it.

A sweep limited to a few tiles (`--sweep-tiles`) need not time the entries it competes with:
`--shipped` / `--neighbor-shipped` take the `bench_gemm --json` files of the same runs, and each row
the sweeps cover gets its shipped plans' times (`shipped_per_channel_plan` / `_us`, `shipped_g128_*`)
as one more timed plan, so that an entry is compared with what its own plan measured in that run.

The tool does not know the decode rule that goes before the table (decode_tile in
gemm_w4a8_wgmma.cpp; `bench_gemm_plans` marks its plans "rule"): an entry of such a layer and
bucket serves only the m the rule leaves, and an override of it replaces the rule too.
"""
import argparse
import json
import math
import os
import re
import sys
from collections import defaultdict

SWEEP_RE = re.compile(r"sweep (\S+) n=(\d+) k=(\d+) (pc|g128) m=(\d+) best")
CHOICE_RE = re.compile(r" ([\w.-]+)/(\d+|sk):([\d.]+)")
# {N, K, BUCKET, P("NAME/SPLITS"), P("NAME/SPLITS")}: splits a number or sk (stream-K)
PLAN = r'P\("([\w.-]+)/(\d+|sk)"\)'
ENTRY_RE = re.compile(r"^\s*\{(\d+), (\d+), (\d+), " + PLAN + ", " + PLAN + r"\}")
STREAM_K = "sk"


def tile_names(repo):
    """kW4A8TileNames of gemm_w4a8_tile_names.h, in id order."""
    src = open(os.path.join(repo, "src/backend/cuda/gemm_w4a8_tile_names.h")).read()
    body = re.search(r"kW4A8TileNames\[kW4A8TileCount\]\s*=\s*\{(.*?)\};", src, re.S)
    if not body:
        sys.exit("gemm_table_refit: no kW4A8TileNames in gemm_w4a8_tile_names.h")
    return re.findall(r'"([^"]+)"', body.group(1))


def m_buckets(repo):
    """The table's m buckets (kW4A8MBuckets of gemm_w4a8_measured.h)."""
    src = open(os.path.join(repo, "src/backend/cuda/gemm_w4a8_measured.h")).read()
    body = re.search(r"kW4A8MBuckets\[\]\s*=\s*\{(.*?)\};", src, re.S)
    if not body:
        sys.exit("gemm_table_refit: no kW4A8MBuckets in gemm_w4a8_measured.h")
    return [int(b) for b in re.findall(r"\d+", body.group(1))]


def table_entries(repo):
    """(n, k, bucket) -> {"pc": (tile name, splits), "g128": (tile name, splits)} of the current
    table (splits an int or STREAM_K)."""
    out = {}
    for line in open(os.path.join(repo, "src/backend/cuda/gemm_w4a8_measured.cpp")):
        m = ENTRY_RE.match(line)
        if m:
            n, k, bucket, pt, ps, gt, gs = m.groups()
            out[(int(n), int(k), int(bucket))] = {"pc": (pt, split_of(ps)), "g128": (gt, split_of(gs))}
    return out


def read_sweeps(paths, shipped=()):
    """(n, k, kind, m) -> {"tile/splits": mean us over the files}; `shipped`: bench_gemm --json
    files whose shipped plans' times join the rows the sweep lines cover."""
    acc = defaultdict(lambda: defaultdict(list))
    for path in paths:
        for line in open(path):
            m = SWEEP_RE.search(line)
            if not m:
                continue
            key = (int(m.group(2)), int(m.group(3)), m.group(4), int(m.group(5)))
            for tile, splits, us in CHOICE_RE.findall(line[m.end():]):
                acc[key][f"{tile}/{splits}"].append(float(us))
    for path in shipped:
        for row in json.load(open(path)):
            for kind, field in (("pc", "per_channel"), ("g128", "g128")):
                key = (row["n"], row["k"], kind, row["m"])
                plan, us = row.get(f"shipped_{field}_plan"), row.get(f"shipped_{field}_us", 0)
                if key in acc and plan and us > 0:
                    acc[key][plan].append(float(us))
    return {key: {c: sum(v) / len(v) for c, v in row.items()} for key, row in acc.items()}


def split_of(text):
    """A sweep's split ("3" or "sk") as the table keeps it (3 or STREAM_K)."""
    return STREAM_K if text == STREAM_K else int(text)


def reproducible(k, splits):
    if splits == STREAM_K:
        return True
    kt = math.ceil(k / 128)
    return math.ceil(kt / math.ceil(kt / splits)) == splits


def mean(rows, c):
    """Plan c's mean time over sweep rows (each {"tile/splits": us})."""
    return sum(r[c] for r in rows) / len(rows)


def decide(rows, nrows, common, old_c, margin, max_loss):
    """The pick for one layer, bucket and kind: (plan, changed).

    rows / nrows: the back-to-back / after-a-neighbor sweeps of the bucket's m (nrows empty: no
    neighbor sweeps); common: the candidate plans; old_c: the entry's plan (None: no entry)."""
    rank = nrows if nrows else rows
    best = min(common, key=lambda c: mean(rank, c))
    if old_c is None:
        return best, True
    if old_c not in common or best == old_c:
        return old_c, False
    if mean(rank, best) >= mean(rank, old_c) * (1 - margin):
        return old_c, False
    if nrows and mean(rows, best) > mean(rows, old_c) * (1 + max_loss):
        return old_c, False
    return best, True


def refit(sweeps, names, buckets, table, margin, show_all, neighbor=None, max_loss=None, overrides=False):
    """Table lines (or, with overrides, QSERVE_W4A8_PLANS entries) for the covered (layer, bucket)s."""
    neighbor = neighbor or {}
    max_loss = margin if max_loss is None else max_loss
    lines = []
    for n, k in sorted({(key[0], key[1]) for key in sweeps}):
        for bucket in buckets:
            ms = [1, 8] if bucket == 1 else [bucket]
            choice, notes, changed_kinds = {}, [], []
            for kind in ("pc", "g128"):
                rows = [sweeps[(n, k, kind, m)] for m in ms if (n, k, kind, m) in sweeps]
                nrows = [neighbor[(n, k, kind, m)] for m in ms if (n, k, kind, m) in neighbor]
                if not rows or (neighbor and not nrows):
                    break
                common = set.intersection(*(set(r) for r in rows + nrows))
                cands = [c for c in common if c.split("/")[0] in names and reproducible(k, split_of(c.split("/")[1]))]
                if not cands:
                    break
                old = table.get((n, k, bucket), {}).get(kind)
                old_c = f"{old[0]}/{old[1]}" if old else None
                pick, kind_changed = decide(rows, nrows, set(cands) | ({old_c} & common), old_c, margin, max_loss)
                if kind_changed:
                    changed_kinds.append((kind, pick))
                choice[kind] = pick
                if pick in common:
                    t = f"{mean(rows, pick):.1f}"
                    if nrows:
                        t += f", {mean(nrows, pick):.1f} after a neighbor"
                else:
                    t = "kept, not swept"
                notes.append(f"{kind} {pick} {t}")
            changed = bool(changed_kinds)
            if len(choice) != 2 or not (changed or show_all):
                continue
            if overrides:
                lines += [f"{n}x{k}@{bucket}:{kind}={pick}" for kind, pick in changed_kinds]
                continue
            pc, g = choice["pc"], choice["g128"]
            mark = "" if changed else " (unchanged)"
            lines.append(f'    {{{n}, {k}, {bucket}, P("{pc}"), P("{g}")}},  '
                         f"// {'; '.join(notes)}{mark}")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sweeps", nargs="+", help="bench_gemm output with sweep lines")
    ap.add_argument("--repo", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--margin", type=float, default=0.02, help="relative gain needed to replace an entry")
    ap.add_argument("--all", action="store_true", help="also print the covered entries that stay")
    ap.add_argument("--neighbor", nargs="+", default=[], help="sweeps run with bench_gemm --neighbor-us")
    ap.add_argument("--max-loss", type=float, default=None,
                    help="with --neighbor: the most a new choice may lose back to back (default: --margin)")
    ap.add_argument("--overrides", action="store_true", help="print the changes as one QSERVE_W4A8_PLANS value")
    ap.add_argument("--shipped", nargs="+", default=[], help="bench_gemm --json files of the back-to-back sweeps' runs")
    ap.add_argument("--neighbor-shipped", nargs="+", default=[], help="bench_gemm --json files of the --neighbor runs")
    a = ap.parse_args()
    names = tile_names(a.repo)
    sweeps = read_sweeps(a.sweeps, a.shipped)
    if not sweeps:
        sys.exit("gemm_table_refit: no sweep lines in the input")
    neighbor = read_sweeps(a.neighbor, a.neighbor_shipped) if a.neighbor else {}
    if a.neighbor and not neighbor:
        sys.exit("gemm_table_refit: no sweep lines in the --neighbor input")
    lines = refit(sweeps, names, m_buckets(a.repo), table_entries(a.repo), a.margin, a.all and not a.overrides,
                  neighbor, a.max_loss, a.overrides)
    if a.overrides:
        print(",".join(lines))
    else:
        for line in lines:
            print(line)


if __name__ == "__main__":
    main()
