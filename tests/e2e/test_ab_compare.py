"""bench/ab_compare.py: A against B from bench_gemm JSON passes and qserve bench throughput JSON
lines, on synthetic files whose ratios are known."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "bench" / "ab_compare.py"


def gemm_row(layer, m, pc_us, g_us, int8_us, pc_plan="wgA/2", g_plan="wgB/1"):
    return {"model": "llama3-8b", "layer": layer, "m": m, "cublaslt_int8_us": int8_us,
            "shipped_per_channel_us": pc_us, "shipped_per_channel_plan": pc_plan,
            "shipped_g128_us": g_us, "shipped_g128_plan": g_plan}


def write(path, obj):
    path.write_text(json.dumps(obj))
    return str(path)


def run(*args):
    r = subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_gemm_ratios_plans_and_target_counts(tmp_path):
    # A: two passes; B: two passes, per-channel 10% faster on o m = 16, g128 the same; cuBLASLt INT8 18 us.
    a = [write(tmp_path / f"a{i}.json", [gemm_row("o", 16, 10.0, 12.0, 18.0), gemm_row("qkv", 1, 9.0, 9.0, 18.0)])
         for i in range(2)]
    b = [write(tmp_path / f"b{i}.json", [gemm_row("o", 16, 9.0, 12.0, 18.0),
                                         gemm_row("qkv", 1, 9.0, 9.0, 18.0, pc_plan="wgC/1")])
         for i in range(2)]
    out = run("gemm", "--a", ",".join(a), "--b", ",".join(b), "--names", "M,U")
    line = next(l for l in out.splitlines() if l.startswith("| llama3-8b o | 16 | per-channel"))
    assert "| 10.00 / 10.00 | 9.00 / 9.00 | 0.900 | 1.80 -> 2.00 |" in line
    # A plan that differs between the builds is marked.
    assert "`wgA/2` -> `wgC/1` (differ)" in out
    # 4 rows: the o per-channel row is the only one off 1.
    assert "4 rows: U / M median 1.000, min 0.900, max 1.000; within 1.5%: 3" in out
    # Issue 4 per-channel >= 1.8x at m <= 64: A 2 of 2 (o 1.80, qkv 2.00), B 2 of 2; issue 8 >= 2.2x: none.
    assert "| 4 | per-channel | m <= 64 | >= 1.8x | 2 of 2 | 2 of 2 |" in out
    assert "| 8 | per-channel | m <= 64 | >= 2.2x | 0 of 2 | 0 of 2 |" in out
    # g128 >= 1.6x: o 18 / 12 = 1.5 (no), qkv 2.0 (yes) on both sides.
    assert "| 4 | g128 | m <= 64 | >= 1.6x | 1 of 2 | 1 of 2 |" in out
    # --only-over hides the rows within the bound but still counts them.
    hidden = run("gemm", "--a", ",".join(a), "--b", ",".join(b), "--only-over", "0.05")
    assert "| llama3-8b qkv |" not in hidden and "| llama3-8b o | 16 | per-channel" in hidden
    assert "4 rows:" in hidden


def test_engine_groups_by_arch_precision_and_sequences(tmp_path):
    lines = []
    for v, tok in (("M", 100.0), ("U", 110.0), ("U", 90.0), ("M", 100.0)):
        for seqs in (1, 64):
            lines.append({"v": v, "precision": "w4a8kv4", "arch": "llama-3-8b", "max_num_seqs": seqs,
                          "decode_tokens_per_s": tok * seqs})
        lines.append({"v": v, "precision": "w4a8kv4", "arch": "llama-3-8b", "best": 1})  # a sweep's summary
    f = tmp_path / "engine.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    out = run("engine", str(f), "--a", "M", "--b", "U")
    assert "| llama-3-8b | w4a8kv4 | 1 | 100 / 100 | 110 / 90 | 1.0000 | overlap |" in out
    assert "| llama-3-8b | w4a8kv4 | 64 | 6400 / 6400 | 7040 / 5760 | 1.0000 |" in out
    # Another field and metric.
    for x in lines:
        x["build"] = x.pop("v")
        if "decode_tokens_per_s" in x:
            x["tpot_ms_p50"] = 1000.0 / x["decode_tokens_per_s"]
    f.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    out = run("engine", str(f), "--a", "M", "--b", "U", "--field", "build", "--metric", "tpot_ms_p50")
    assert "| llama-3-8b | w4a8kv4 | 1 | 10 / 10 |" in out


def test_engine_says_when_the_sides_runs_are_apart(tmp_path):
    lines = [{"v": v, "precision": "w4a8kv4", "arch": "llama-3-8b", "max_num_seqs": 16, "decode_tokens_per_s": t}
             for v, t in (("A", 5600.0), ("B", 5560.0), ("B", 5566.0), ("A", 5590.0))]
    lines += [{"v": v, "precision": "w4a8kv4-chn", "arch": "llama-3-8b", "max_num_seqs": 16, "decode_tokens_per_s": t}
              for v, t in (("A", 5780.0), ("B", 5820.0), ("B", 5812.0), ("A", 5743.0))]
    f = tmp_path / "engine.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    out = run("engine", str(f), "--a", "A", "--b", "B")
    assert "| llama-3-8b | w4a8kv4 | 16 | 5600 / 5590 | 5560 / 5566 | 0.9943 | B below |" in out
    assert "| llama-3-8b | w4a8kv4-chn | 16 | 5780 / 5743 | 5820 / 5812 | 1.0095 | B above |" in out


def test_engine_warns_when_the_sides_warm_up_differently(tmp_path):
    base = {"precision": "w4a8kv4", "arch": "llama-3-8b", "max_num_seqs": 64}
    f = tmp_path / "engine.jsonl"
    # A cold (no warmup_runs: an older build), B warmed once.
    lines = [dict(base, v="A", decode_tokens_per_s=100.0), dict(base, v="B", decode_tokens_per_s=103.0, warmup_runs=1)]
    f.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    out = run("engine", str(f), "--a", "A", "--b", "B")
    assert "| llama-3-8b | w4a8kv4 | 64 | 100 | 103 | 1.0300 | B above |" in out
    assert "warning: the sides ran with different warm-ups (A: cold; B: 1 untimed runs first)" in out
    # The same warm-up on both sides: no warning.
    lines[0]["warmup_runs"] = 1
    f.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    assert "warning" not in run("engine", str(f), "--a", "A", "--b", "B")
