"""bench/peer_hf_generate.py's ARCHS mirrors src/engine/dummy_arch.cpp's kArchs:
the peer's random-weight model must have the shapes qserve's `--load-format
dummy --arch A` builds, or the throughput table compares different models."""
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def peer_archs():
    spec = importlib.util.spec_from_file_location("peer_hf_generate", ROOT / "bench" / "peer_hf_generate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # imports transformers only inside functions
    return mod.ARCHS


def engine_archs():
    # Rows of kArchs: {"name", hidden, layers, heads, kv_heads, intermediate, vocab, rope_theta, context, bos, eos},
    src = (ROOT / "src" / "engine" / "dummy_arch.cpp").read_text()
    table = src[src.index("kArchs[]"):]
    table = table[:table.index("};")]
    rows = {}
    for name, fields in re.findall(r'\{"([^"]+)",([^}]*)\}', table):
        v = [x.strip() for x in fields.split(",")]
        assert len(v) == 10, (name, v)
        rows[name] = (*(int(x) for x in v[:6]), float(v[6]), int(v[7]))
    return rows


def test_engine_table_is_parsed():
    rows = engine_archs()
    assert "llama-3-8b" in rows and len(rows) >= 5
    assert rows["llama-3-8b"] == (4096, 32, 32, 8, 14336, 128256, 500000.0, 8192)


def test_peer_archs_match_the_engine_dummy_archs():
    assert peer_archs() == engine_archs()
