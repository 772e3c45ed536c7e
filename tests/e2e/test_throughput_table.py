"""The serving benchmark's scripts on the CPU with the tiny shapes:
bench/run_throughput_table.sh (qserve bench throughput under several budgets,
the headline pair, the peer) and its markdown, and bench/peer_hf_generate.py
(transformers generate with random weights of the same shape, EOS ignored)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
QSERVE = Path(os.environ.get("QSERVE_BIN", ROOT / "build" / "qserve"))


def have_transformers():
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not have_transformers(), reason="skipped: torch / transformers not installed")
def test_peer_runs_on_the_cpu_and_ignores_eos():
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "peer_hf_generate.py"), "--arch", "tiny-odd", "--device",
                        "cpu", "--dtype", "float32", "--input-len", "12", "--output-len", "5", "--batch-sizes", "3",
                        "--json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout.strip().splitlines()[-1])
    assert j["arch"] == "tiny-odd" and j["batch"] == 3
    assert j["output_tokens"] == 15  # min_new_tokens = max_new_tokens
    assert j["output_tokens_per_s"] > 0


@pytest.mark.skipif(not QSERVE.exists(), reason=f"skipped: {QSERVE} not built (scripts/build.sh cpu qserve)")
def test_table_script_on_the_cpu(tmp_path):
    env = dict(os.environ, DEVICE="cpu", ARCHS="tiny", PRECISIONS="fp16 w4a8kv4", BUDGETS="100MB,1KB", INPUT_LEN="16",
               OUTPUT_LEN="4", MAX_SEQS="3", MAX_BATCHED_TOKENS="64", HEADLINE_ARCH="tiny", HEADLINE_SEQS="4",
               PEER="0", PYTHON=sys.executable)
    r = subprocess.run([str(ROOT / "bench" / "run_throughput_table.sh"), str(QSERVE), str(tmp_path)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(l) for l in (tmp_path / "throughput.jsonl").read_text().splitlines()]
    cells = [l for l in lines if l["bench"] == "throughput"]
    assert len(cells) == 2 * 2  # 2 precisions x 2 budgets (one without room)
    ok = [c for c in cells if "error" not in c]
    assert len(ok) == 2 and all(c["output_tokens"] == c["num_prompts"] * 4 == 3 * 4 for c in ok)
    assert sum("no room for the KV cache" in c.get("error", "") for c in cells) == 2
    head = [json.loads(l) for l in (tmp_path / "headline.jsonl").read_text().splitlines()]
    assert [h["precision"] for h in head] == ["fp16", "w4a8kv4"] and all(h["max_num_seqs"] == 4 for h in head)
    md = (tmp_path / "table.md").read_text()
    assert "| tiny | w4a8kv4 |" in md and "does not fit" in md and "W4A8KV4 against our FP16" in md
    assert "## Headline" in md
