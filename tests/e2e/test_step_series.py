"""bench/step_series.py: where the slow engine steps fall, on synthetic step series whose slow
steps are known."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "bench" / "step_series.py"


def line(side, series, tok=1000.0):
    return json.dumps({"v": side, "bench": "throughput", "arch": "llama-3.2-1b", "precision": "w4a8kv4-chn",
                       "max_num_seqs": 64, "decode_tokens_per_s": tok, "device_busy_us_steps": series})


def run(*args):
    r = subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_a_tail_of_slow_steps_at_page_boundaries(tmp_path):
    # A: a prefill step, then 96 steps of 1000 us. B: the prefill, 96 steps of 980 us, every 16th
    # (index 16, 32, ...: 15 past the prefill's) 1500 us: the median drops, the mean rises.
    a = [50000.0] + [1000.0] * 96
    b = [50000.0] + [1500.0 if i % 16 == 0 else 980.0 for i in range(1, 97)]
    f = tmp_path / "runs.jsonl"
    f.write_text("\n".join([line("A", a), line("B", b), "{\"bench\": \"throughput_sweep\"}", "not json"]) + "\n")
    out = run(str(f))
    rows = {l.split("|")[1].strip(): l for l in out.splitlines() if l.startswith("| A |") or l.startswith("| B |")}
    # per run: 96 decode steps and the prefill apart; A has no slow step
    assert "| A | llama-3.2-1b | w4a8kv4-chn | 64 | 1,000 | 96 (+1) | 1000 | 1000 | 0 | 0.0% |" in out
    # B: six slow steps (16, 32, ..., 96), 6 x 520 us over a decode total of 90 x 980 + 6 x 1500
    assert "| B | llama-3.2-1b | w4a8kv4-chn | 64 | 1,000 | 96 (+1) | 980 | 1012 | 6 | 3.2% |" in out
    assert "B: slow steps at 16, 32, 48, 64, 80, 96; by index mod 16: 0: 6" in out
    # per side: B's median 0.98 of A's, its mean 1.0125
    assert "| B | 1 | 980.0 | 1012.5 | 0.9800 | 1.0125 |" in out
    assert rows  # both sides' run rows are printed


def test_slow_threshold_and_period_and_no_series(tmp_path):
    f = tmp_path / "runs.jsonl"
    f.write_text(line("C", [100.0, 100.0, 108.0, 100.0, 130.0, 100.0, 100.0, 100.0]) + "\n")
    out = run(str(f), "--slow", "1.05", "--period", "4")
    assert "C: slow steps at 2, 4; by index mod 4: 0: 1, 2: 1" in out
    empty = tmp_path / "none.jsonl"
    empty.write_text(json.dumps({"v": "A", "bench": "throughput"}) + "\n")
    r = subprocess.run([sys.executable, str(TOOL), str(empty)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "QSERVE_STEP_TIMING=steps" in r.stderr
