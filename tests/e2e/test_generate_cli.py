"""`qserve generate` on the default model: streamed text, seeded determinism,
the chat template, and bad input (one clear line on stderr, a non-zero exit,
nothing on stdout)."""
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
QSERVE = Path(os.environ.get("QSERVE_BIN", ROOT / "build" / "qserve"))
HOME = Path(os.environ.get("QSERVE_HOME") or Path.home() / ".cache" / "qserve")
DEFAULT_MODEL = HOME / "models" / "SmolLM2-135M-Instruct"

pytestmark = [
    pytest.mark.skipif(not QSERVE.exists(), reason=f"skipped: {QSERVE} not built (scripts/build.sh cpu qserve)"),
]
needs_model = pytest.mark.skipif(not (DEFAULT_MODEL / "config.json").exists(),
                                 reason="skipped: default model not installed (scripts/install_model.sh)")


def generate(*args, timeout=300):
    return subprocess.run([str(QSERVE), "generate", *args], capture_output=True, text=True, timeout=timeout)


def assert_one_line_error(r, code):
    assert r.returncode == code, (r.returncode, r.stderr)
    assert r.stdout == ""
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("qserve: error:"), r.stderr


@needs_model
def test_greedy_completion_is_fluent_and_reports_speed():
    r = generate("--prompt", "The capital of France is", "--max-tokens", "8", "--temperature", "0")
    assert r.returncode == 0, r.stderr
    assert "Paris" in r.stdout
    assert "prefill" in r.stderr and "decode" in r.stderr and "tok/s" in r.stderr


@needs_model
def test_same_seed_same_text_and_chat_template():
    args = ["--chat", "--prompt", "Name three colours.", "--max-tokens", "16", "--temperature", "0.9", "--seed", "11"]
    a, b = generate(*args), generate(*args)
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert a.stdout == b.stdout and a.stdout.strip()


@needs_model
def test_stop_string_cuts_the_text():
    r = generate("--prompt", "1, 2, 3, 4, 5,", "--max-tokens", "24", "--temperature", "0", "--stop", " 8")
    assert r.returncode == 0, r.stderr
    assert " 8" not in r.stdout and "7" in r.stdout
    assert "finish: stop" in r.stderr


@needs_model
def test_prompt_longer_than_the_context_is_an_error():
    r = generate("--prompt", "word " * 9000, "--max-tokens", "4")
    assert_one_line_error(r, 1)
    assert "context" in r.stderr


def test_missing_model_is_an_error(tmp_path):
    assert_one_line_error(generate("--model", str(tmp_path / "nope"), "--prompt", "hi"), 1)


def test_unsupported_architecture_is_an_error(tmp_path):
    (tmp_path / "config.json").write_text('{"architectures": ["GPT2LMHeadModel"], "vocab_size": 10}')
    assert_one_line_error(generate("--model", str(tmp_path), "--prompt", "hi"), 1)


def test_corrupt_checkpoint_is_an_error(tmp_path):
    src = ROOT / "tests" / "data" / "models" / "tiny-llama"
    for f in src.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    st = tmp_path / "model.safetensors"
    st.write_bytes(st.read_bytes()[: st.stat().st_size // 2])  # truncated
    assert_one_line_error(generate("--model", str(tmp_path), "--prompt", "hi"), 1)


@pytest.mark.parametrize("flag", [["--top-p", "2"], ["--max-tokens", "abc"], ["--temperature", "-1"], ["--bogus"]])
def test_invalid_flag_is_an_error(flag):
    assert_one_line_error(generate("--prompt", "hi", *flag), 2)
