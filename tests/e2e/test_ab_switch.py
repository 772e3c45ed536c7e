"""bench/ab_switch.sh: A B B A passes of one command with an environment variable switched, on stand-in
commands (Python one-liners) that report what they saw, then read back by bench/ab_compare.py."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SWITCH = ROOT / "bench" / "ab_switch.sh"
COMPARE = ROOT / "bench" / "ab_compare.py"

# A stand-in bench_gemm: writes one row to the file after --json, its per-channel time 10 us with
# SWITCH_UNDER_TEST unset or 0 and 9 us with 1, so B / A = 0.9.
FAKE_GEMM = """
import json, os, sys
v = os.environ.get("SWITCH_UNDER_TEST", "unset")
us = 9.0 if v == "1" else 10.0
row = {"model": "llama3-8b", "layer": "o", "m": 16, "cublaslt_int8_us": 18.0,
       "shipped_per_channel_us": us, "shipped_per_channel_plan": "wgA/2",
       "shipped_g128_us": 12.0, "shipped_g128_plan": "wgB/1"}
json.dump([row], open(sys.argv[sys.argv.index("--json") + 1], "w"))
print("env", v)
"""

# A stand-in qserve bench throughput --json: a log line on stderr, a text line and one JSON line on stdout.
FAKE_ENGINE = """
import json, os, sys
v = os.environ.get("SWITCH_UNDER_TEST", "unset")
print("loading", file=sys.stderr)
print("a text line")
print(json.dumps({"arch": "llama-3-8b", "precision": "w4a8kv4", "max_num_seqs": 64, "env": v,
                  "decode_tokens_per_s": 1100.0 if v == "1" else 1000.0}))
"""


def switch(*args):
    return subprocess.run(["bash", str(SWITCH), *args], capture_output=True, text=True, timeout=120)


def test_gemm_passes_in_order_with_the_variable(tmp_path):
    out = tmp_path / "ab"
    r = switch("SWITCH_UNDER_TEST", "0", "1", str(out), "gemm", "--", sys.executable, "-c", FAKE_GEMM)
    assert r.returncode == 0, r.stderr
    # A B B A: A's passes 1 and 2, B's 1 and 2, each with its own value.
    sides = [l.split()[1] for l in r.stdout.splitlines() if l.startswith("ab_switch:")]
    assert sides == ["A", "B", "B", "A"]
    for side, value in (("A", "0"), ("B", "1")):
        for k in (1, 2):
            assert (out / f"{side}{k}.log").read_text().strip() == f"env {value}"
            assert json.loads((out / f"{side}{k}.json").read_text())[0]["m"] == 16
    cmp = subprocess.run([sys.executable, str(COMPARE), "gemm", "--a", f"{out}/A1.json,{out}/A2.json",
                          "--b", f"{out}/B1.json,{out}/B2.json"], capture_output=True, text=True, timeout=60)
    assert cmp.returncode == 0, cmp.stderr
    line = next(l for l in cmp.stdout.splitlines() if l.startswith("| llama3-8b o | 16 | per-channel"))
    assert "| 0.900 |" in line


def test_engine_lines_tagged_and_unset_side(tmp_path):
    out = tmp_path / "ab"
    r = switch("--order", "ABAB", "SWITCH_UNDER_TEST", "-", "1", str(out), "engine", "--",
               sys.executable, "-c", FAKE_ENGINE)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(l) for l in (out / "engine.jsonl").read_text().splitlines()]
    # Only the JSON lines, "v" first, in run order; "-" leaves the variable unset.
    assert [l["v"] for l in lines] == ["A", "B", "A", "B"]
    assert list(lines[0])[0] == "v"
    assert [l["env"] for l in lines] == ["unset", "1", "unset", "1"]
    assert (out / "engine.log").read_text().count("loading") == 4
    cmp = subprocess.run([sys.executable, str(COMPARE), "engine", str(out / "engine.jsonl"), "--a", "A", "--b", "B"],
                         capture_output=True, text=True, timeout=60)
    assert cmp.returncode == 0, cmp.stderr
    assert "1.1000" in cmp.stdout


def test_bad_arguments_are_refused(tmp_path):
    assert switch("VAR", "0", "1", str(tmp_path), "gemm").returncode == 2           # no "--" and command
    assert switch("VAR", "0", "1", str(tmp_path), "other", "--", "true").returncode == 2
    assert switch("--order", "AXB", "VAR", "0", "1", str(tmp_path), "gemm", "--", "true").returncode == 2
