#!/usr/bin/env python3
"""The markdown of bench/run_throughput_table.sh: JSON lines of
`qserve bench throughput` (and of bench/peer_hf_generate.py) -> tables.

  python3 bench/throughput_table_md.py throughput.jsonl [headline.jsonl [peer.jsonl]] > table.md
"""
import json
import sys


def load(path):
    rows = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    rows.append(json.loads(line))
    except FileNotFoundError:
        pass
    return rows


def gb(b):
    if not b:
        return "default"
    if b >= 1e9:
        return f"{b / 1e9:.0f} GB"
    return f"{b / 1e6:.0f} MB" if b >= 1e6 else f"{b} B"


def main():
    runs = load(sys.argv[1])
    headline = [r for r in load(sys.argv[2]) if r.get("bench") == "throughput"] if len(sys.argv) > 2 else []
    peers = load(sys.argv[3]) if len(sys.argv) > 3 else []
    cells = [r for r in runs if r.get("bench") == "throughput"]
    errors = [r for r in runs if r.get("bench") == "error"]
    # Budgets in the order first seen (the device's own first, as the script runs them).
    budgets = []
    for r in cells:
        if r["memory_budget"] not in budgets:
            budgets.append(r["memory_budget"])
    budgets.sort(reverse=True)
    keys = []
    for r in cells:
        k = (r["arch"], r["precision"])
        if k not in keys:
            keys.append(k)
    # A process that printed nothing (e.g. weights that fit no budget): its tag is "arch precision".
    failed = {}
    for e in errors:
        parts = str(e.get("tag", "")).split()
        if len(parts) == 2:
            msg = str(e.get("error"))
            failed[tuple(parts)] = ("weights do not fit" if "do not fit" in msg
                                    else "skipped" if "skipped" in msg else "error")
            if tuple(parts) not in keys:
                keys.append(tuple(parts))
    # The main table: the first run of each (arch, precision, budget) (headline runs come later).
    first = {}
    for r in cells:
        first.setdefault((r["arch"], r["precision"], r["memory_budget"]), r)
    if cells:
        c = cells[0]
        print(f"# Serving throughput: input {c['input_len']}, output {c['output_len']}, device {c['device']}\n")
    print("Generated tokens / s (one full batch: batch used / batch the budget's KV cache holds).\n")
    print("| arch | precision | " + " | ".join(gb(b) for b in budgets) + " |")
    print("|---|---|" + "---|" * len(budgets))
    for arch, prec in keys:
        row = []
        for b in budgets:
            r = first.get((arch, prec, b))
            if r is None:
                row.append(failed.get((arch, prec), "-"))
            elif "error" in r:
                row.append("does not fit")
            else:
                same = "*" if "measured_with_budget" in r else ""
                row.append(f"{r['output_tokens_per_s']:,.0f}{same} (b={r['max_num_seqs']}/{r['max_batch_fits']})")
        print(f"| {arch} | {prec} | " + " | ".join(row) + " |")
    if any("measured_with_budget" in r for r in cells):
        print("\n\\* the same engine as under the larger budget (the batch is capped, not the memory): "
              "that run, not repeated.")
    for e in errors:
        print(f"\n- {e.get('tag')}: {e.get('error')}")

    print("\n## Details\n")
    print("| arch | precision | budget | batch | output tok/s | prefill tok/s | decode tok/s | TTFT p50 / p99 ms "
          "| TPOT p50 / p99 ms | KV pages peak / total | weights GiB | wall s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in cells:
        if "error" in r or "measured_with_budget" in r:
            continue
        print(f"| {r['arch']} | {r['precision']} | {gb(r['memory_budget'])} | {r['max_num_seqs']} | "
              f"{r['output_tokens_per_s']:,.0f} | {r['prefill_tokens_per_s']:,.0f} | {r['decode_tokens_per_s']:,.0f} | "
              f"{r['ttft_ms_p50']:.0f} / {r['ttft_ms_p99']:.0f} | {r['tpot_ms_p50']:.1f} / {r['tpot_ms_p99']:.1f} | "
              f"{r['kv_pages_peak_used']} / {r['kv_pages_total']} | {r['weight_bytes'] / 2**30:.1f} | {r['wall_s']:.1f} |")

    # The targets: w4a8kv4 >= 2x fp16 and >= 12,000 tok/s on the headline arch, at its largest batch.
    if headline:
        print("\n## Headline: the largest batch at the device's memory\n")
        print("| arch | precision | batch (fits) | output tok/s | prefill tok/s | decode tok/s | TTFT p50 / p99 ms "
              "| TPOT p50 / p99 ms |")
        print("|---|---|---|---|---|---|---|---|")
        for r in headline:
            if "error" in r:
                continue
            print(f"| {r['arch']} | {r['precision']} | {r['max_num_seqs']} ({r['max_batch_fits']}) | "
                  f"{r['output_tokens_per_s']:,.0f} | {r['prefill_tokens_per_s']:,.0f} | "
                  f"{r['decode_tokens_per_s']:,.0f} | {r['ttft_ms_p50']:.0f} / {r['ttft_ms_p99']:.0f} | "
                  f"{r['tpot_ms_p50']:.1f} / {r['tpot_ms_p99']:.1f} |")
    best = {}
    for r in cells + headline:
        if "error" in r:
            continue
        k = (r["arch"], r["precision"])
        if k not in best or r["output_tokens_per_s"] > best[k]["output_tokens_per_s"]:
            best[k] = r
    archs = []
    for arch, _ in keys + [(r["arch"], r["precision"]) for r in headline]:
        if arch not in archs:
            archs.append(arch)
    print("\n## W4A8KV4 against our FP16 (best of each; targets on llama-3-8b: ratio >= 2, w4a8kv4 >= 12,000)\n")
    print("| arch | fp16 tok/s | w4a8kv4 tok/s | ratio |")
    print("|---|---|---|---|")
    for arch in archs:
        f, w = best.get((arch, "fp16")), best.get((arch, "w4a8kv4"))
        if f and w:
            print(f"| {arch} | {f['output_tokens_per_s']:,.0f} (b={f['max_num_seqs']}) | "
                  f"{w['output_tokens_per_s']:,.0f} (b={w['max_num_seqs']}) | "
                  f"{w['output_tokens_per_s'] / f['output_tokens_per_s']:.2f}x |")
        elif w:
            print(f"| {arch} | - | {w['output_tokens_per_s']:,.0f} (b={w['max_num_seqs']}) | - |")

    if peers:
        print("\n## Peer: Hugging Face transformers generate (FP16, largest batch that fits)\n")
        print("| arch | framework | batch | output tok/s | wall s |")
        print("|---|---|---|---|---|")
        for p in peers:
            if p.get("bench") != "peer_hf_generate" or "error" in p:
                print(f"| {p.get('arch', p.get('tag'))} | - | - | {p.get('error')} | - |")
                continue
            print(f"| {p['arch']} | {p['framework']} | {p['batch']} | {p['output_tokens_per_s']:,.0f} | "
                  f"{p['wall_s']:.1f} |")


if __name__ == "__main__":
    main()
