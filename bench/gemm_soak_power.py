#!/usr/bin/env python3
"""Power and clock of each `bench_gemm --soak-ms` run, from nvidia-smi samples taken beside it.

Usage: bench/gemm_soak_power.py SOAK.txt SMI.csv [--md]

SOAK.txt: bench_gemm's output with --soak-ms (a "soak" header per row, then one line per kernel
with its wall-clock span and the time per launch at the start and the end). SMI.csv: samples
from `nvidia-smi --query-gpu=timestamp,power.draw.instant,power.draw,clocks.sm,...
--format=csv,noheader -lms 100` run during the benchmark, with the field list as its first line
(the one given to --query-gpu). Both clocks are UTC (bench_gemm prints UTC; run nvidia-smi with
TZ=UTC or on a UTC machine).

For each soak: the mean power, SM clock and share of samples with the software power cap active
over the last third of its span (where the time per launch is measured), and the energy per
launch (power x time). At the board's power cap, time per launch = energy per launch / cap, so
the ratio of two kernels' sustained times is the ratio of their energies.
"""
import argparse
import datetime
import re

HEADER_RE = re.compile(r"^(\S+)\s+(\S+)\s+m=(\d+)\s+soak")
SOAK_RE = re.compile(r"^\s+soak (\S+)\s+(\S+ \S+) \.\. (\S+ \S+)\s+(\d+) replays x (\d+) launches: "
                     r"([\d.]+) us at the start, ([\d.]+) us at the end")


def stamp(text):
    return datetime.datetime.strptime(text.strip(), "%Y/%m/%d %H:%M:%S.%f")


def read_samples(path):
    """[(time, {field: value})] of the nvidia-smi CSV (first line: the field names)."""
    lines = open(path).read().splitlines()
    fields = [f.strip() for f in lines[0].split(",")]
    out = []
    for line in lines[1:]:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != len(fields):
            continue
        try:
            row = dict(zip(fields, parts))
            out.append((stamp(row["timestamp"]), row))
        except ValueError:
            continue
    return out


def number(text):
    return float(text.split()[0])


def soaks(path):
    """[(model, layer, m, kernel, start, end, us_end)] of the benchmark output."""
    row, out = None, []
    for line in open(path):
        h = HEADER_RE.match(line)
        if h:
            row = (h.group(1), h.group(2), int(h.group(3)))
            continue
        s = SOAK_RE.match(line)
        if s and row:
            out.append((*row, s.group(1), stamp(s.group(2)), stamp(s.group(3)), float(s.group(7))))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("soak")
    ap.add_argument("smi")
    ap.add_argument("--md", action="store_true", help="a markdown table")
    a = ap.parse_args()
    samples = read_samples(a.smi)
    power_field = "power.draw.instant" if samples and "power.draw.instant" in samples[0][1] else "power.draw"
    cap_field = "clocks_event_reasons.sw_power_cap"
    if a.md:
        print("| model | layer | m | kernel | us per launch (end) | power W | SM clock MHz | power cap active | "
              "energy per launch mJ | vs cuBLASLt INT8 (its time / this) |")
        print("|---|---|---|---|---|---|---|---|---|---|")
    int8_us = {}
    for model, layer, m, kernel, start, end, us in soaks(a.soak):
        tail = [r for t, r in samples if start + (end - start) * 2 / 3 <= t <= end]
        if not tail:
            print(f"{model} {layer} m={m} {kernel}: no samples in its span")
            continue
        power = sum(number(r[power_field]) for r in tail) / len(tail)
        clock = sum(number(r["clocks.sm"]) for r in tail) / len(tail)
        cap = sum(r.get(cap_field) == "Active" for r in tail) / len(tail) if cap_field in tail[0] else float("nan")
        if kernel == "int8":
            int8_us[(model, layer, m)] = us
        ratio = int8_us[(model, layer, m)] / us if (model, layer, m) in int8_us else float("nan")
        if a.md:
            print(f"| {model} | {layer} | {m} | {kernel} | {us:.1f} | {power:.0f} | {clock:.0f} | {cap:.0%} | "
                  f"{power * us / 1000:.1f} | {ratio:.2f}x |")
        else:
            print(f"{model:9s} {layer:7s} m={m:<5d} {kernel:5s} {us:8.1f} us  {power:4.0f} W  {clock:5.0f} MHz  "
                  f"cap {cap:4.0%}  {power * us / 1000:7.1f} mJ  x{ratio:.2f} cuBLASLt INT8")


if __name__ == "__main__":
    main()
