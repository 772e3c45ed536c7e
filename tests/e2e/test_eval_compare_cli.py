"""`qserve eval compare`: the device-acceptance check, exercised here with the
CPU against itself (identical by construction: agreement 1, no divergence),
several devices against one reference run, and unknown devices (one clear
error line)."""
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
QSERVE = Path(os.environ.get("QSERVE_BIN", ROOT / "build" / "qserve"))
HOME = Path(os.environ.get("QSERVE_HOME") or Path.home() / ".cache" / "qserve")
DEFAULT_MODEL = HOME / "models" / "SmolLM2-135M-Instruct"
SHARED = Path(os.environ.get("QSERVE_SHARED_DATA", ROOT.parent / "shared" / "data"))
WIKI = SHARED / "text" / "wikitext2_test_joined_LF.txt"

pytestmark = [
    pytest.mark.skipif(not QSERVE.exists(), reason=f"skipped: {QSERVE} not built (scripts/build.sh cpu qserve)"),
    pytest.mark.skipif(not (DEFAULT_MODEL / "config.json").exists(),
                       reason="skipped: default model not installed (scripts/install_model.sh)"),
]


def compare(*args):
    return subprocess.run([str(QSERVE), "eval", "compare", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(not WIKI.exists(), reason=f"skipped: {WIKI} absent")
def test_cpu_against_itself_agrees_everywhere():
    r = compare("--device", "cpu", "--text", str(WIKI), "--seqlen", "48", "--max-windows", "1",
                "--max-new-tokens", "6", "--json")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    t = j["teacher_forced"]
    assert t["positions"] == 48 and t["top1_agreement"] == 1.0 and t["ppl_rel_diff"] == 0.0
    assert 1.0 < t["ppl_reference"] < 1e4
    assert j["greedy"]["prompts"] == 4 and j["greedy"]["identical"] == 4


@pytest.mark.skipif(not WIKI.exists(), reason=f"skipped: {WIKI} absent")
def test_several_devices_against_one_reference_run():
    # One JSON line per --device, in order; rounding at no point is the reference itself.
    r = compare("--device", "cpu-fp16:none", "--device", "cpu-fp16", "--text", str(WIKI), "--seqlen", "32",
                "--max-windows", "1", "--max-new-tokens", "4", "--json")
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert [j["device"] for j in lines] == ["cpu-fp16:none", "cpu-fp16"]
    none, fp16 = lines[0]["teacher_forced"], lines[1]["teacher_forced"]
    assert none["top1_agreement"] == 1.0 and none["max_logit_diff_over_max_abs"] == 0.0
    assert lines[0]["greedy"]["identical"] == 4
    assert fp16["ppl_reference"] == none["ppl_reference"] and fp16["max_logit_diff_over_max_abs"] > 0.0


@pytest.mark.skipif(not WIKI.exists(), reason=f"skipped: {WIKI} absent")
def test_controls_set_the_verdict_and_strict_fails_on_it():
    # Controls come first (role "control"); each device then carries a verdict against their spread.
    # Rounding to 3 mantissa bits is far outside what fp16 rounding (the control) moves: FAIL, exit 1.
    args = ["--control", "cpu-fp16", "--device", "cpu-fp16:none", "--device", "cpu-fp16:all,mantissa=3",
            "--text", str(WIKI), "--seqlen", "32", "--max-windows", "1", "--max-new-tokens", "2", "--json"]
    r = compare(*args)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert [j["device"] for j in lines] == ["cpu-fp16", "cpu-fp16:none", "cpu-fp16:all,mantissa=3"]
    assert lines[0]["role"] == "control" and "verdict" not in lines[0]
    same, coarse = lines[1]["verdict"], lines[2]["verdict"]
    assert same["basis"] == "controls" and same["pass"] and same["ppl_limit"] >= 0.005
    assert not coarse["pass"] and not coarse["top1_pass"]
    assert compare(*args, "--strict").returncode == 1
    assert compare("--device", "cpu-fp16:none", "--text", str(WIKI), "--seqlen", "32", "--max-windows", "1",
                   "--max-new-tokens", "2", "--strict").returncode == 0


@pytest.mark.skipif(not WIKI.exists(), reason=f"skipped: {WIKI} absent")
def test_a_saved_reference_gives_the_same_figures(tmp_path):
    # The reference and the controls run once and go to a file; a later run that loads it compares
    # its device against them without running the reference: the same top-1 and perplexities.
    ref = tmp_path / "ref.json"
    common = ["--text", str(WIKI), "--seqlen", "32", "--max-windows", "2", "--max-new-tokens", "3", "--json"]
    first = compare("--control", "cpu-fp16", "--device", "cpu-fp16:residual", "--save-reference", str(ref), *common)
    assert first.returncode == 0, first.stderr
    assert ref.exists()
    second = compare("--device", "cpu-fp16:residual", "--load-reference", str(ref), *common)
    assert second.returncode == 0, second.stderr
    a = [json.loads(line) for line in first.stdout.splitlines()]
    b = [json.loads(line) for line in second.stdout.splitlines()]
    assert [j["device"] for j in b] == ["cpu-fp16", "cpu-fp16:residual"] and b[0]["role"] == "control"
    for x, y in zip(a, b):
        tx, ty = x["teacher_forced"], y["teacher_forced"]
        for k in ("positions", "top1_agreement", "ppl_reference", "ppl_device", "ppl_rel_diff"):
            assert tx[k] == ty[k], k
        assert x["greedy"] == y["greedy"]
    assert a[1]["verdict"] == b[1]["verdict"]
    assert "max_logit_diff_over_max_abs" not in b[1]["teacher_forced"]  # the full reference logits stay behind
    # Another setting than the file's is one clear error naming it.
    other = compare("--device", "cpu", "--load-reference", str(ref), "--text", str(WIKI), "--seqlen", "16",
                    "--max-windows", "2", "--max-new-tokens", "3")
    assert other.returncode != 0 and "was made for another seqlen" in other.stderr
    both = compare("--device", "cpu", "--load-reference", str(ref), "--control", "cpu-fp16", *common)
    assert both.returncode != 0 and "the controls come from the reference file" in both.stderr
    # Saving needs no device under test: only the controls are reported.
    alone = compare("--control", "cpu-fp16", "--save-reference", str(tmp_path / "alone.json"), *common)
    assert alone.returncode == 0, alone.stderr
    assert [json.loads(line)["device"] for line in alone.stdout.splitlines()] == ["cpu-fp16"]


def test_control_without_text_is_one_clear_error():
    r = compare("--control", "cpu-fp16", "--device", "cpu", "--max-new-tokens", "1")
    assert r.returncode != 0 and r.stdout == ""
    assert "--control needs --text" in r.stderr


def test_unknown_rounding_point_is_one_clear_error():
    r = compare("--device", "cpu-fp16:all,-resid", "--max-new-tokens", "1")
    assert r.returncode != 0 and r.stdout == ""
    assert "unknown fp16 rounding point 'resid'" in r.stderr


def test_unknown_device_is_one_clear_error():
    r = compare("--device", "tpu", "--max-new-tokens", "1")
    assert r.returncode != 0 and r.stdout == ""
    assert "unknown device 'tpu'" in r.stderr
