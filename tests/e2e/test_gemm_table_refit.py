"""bench/gemm_table_refit.py: measured-table entries from bench_gemm sweep lines, on a
small stand-in of the repository (a tile-name list, the m buckets and a table of one entry) and
synthetic sweeps; then on the real repository's files (they must parse)."""
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "bench" / "gemm_table_refit.py"


def refit_module():
    """The tool as a module, for its parsers of the real repository's files."""
    if str(ROOT / "bench") not in sys.path:
        sys.path.insert(0, str(ROOT / "bench"))
    return importlib.import_module("gemm_table_refit")

NAMES = '''inline constexpr std::string_view kW4A8TileNames[kW4A8TileCount] = {"128x8", "wgA", "wgB",
                                                                    "wgC-k256"};'''
BUCKETS = "inline constexpr int kW4A8MBuckets[] = {1, 16, 32, 64, 128, 256, 512};\n"
TABLE = '''constexpr Entry kTable[] = {
    {4096, 4096, 16, P("wgA/2"), P("wgA/2")},  // pc wgA/2; g128 wgA/2
};'''


def sweep(n, k, kind, m, times):
    best = min(times, key=times.get)
    body = " ".join(f"{c}:{t}" for c, t in times.items())
    return f"  sweep x/y n={n} k={k} {kind} m={m} best {best} {times[best]} us (planner 9.9) {body}\n"


def run(tmp_path, lines, *args, neighbor=None):
    (tmp_path / "src/backend/cuda").mkdir(parents=True)
    (tmp_path / "src/backend/cuda/gemm_w4a8_tile_names.h").write_text(NAMES)
    (tmp_path / "src/backend/cuda/gemm_w4a8_measured.cpp").write_text(TABLE)
    (tmp_path / "src/backend/cuda/gemm_w4a8_measured.h").write_text(BUCKETS)
    s = tmp_path / "sweep.txt"
    s.write_text("".join(lines))
    if neighbor is not None:
        (tmp_path / "neighbor.txt").write_text("".join(neighbor))
        args = (*args, "--neighbor", str(tmp_path / "neighbor.txt"))
    r = subprocess.run([sys.executable, str(TOOL), str(s), "--repo", str(tmp_path), *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def test_new_layer_bucket_one_is_the_mean_of_m_1_and_8(tmp_path):
    lines = []
    for kind in ("pc", "g128"):
        # wgB wins at m = 1 alone, wgA over m = 1 and 8 together.
        lines.append(sweep(6144, 4096, kind, 1, {"wgA/2": 5.0, "wgB/2": 4.9}))
        lines.append(sweep(6144, 4096, kind, 8, {"wgA/2": 5.0, "wgB/2": 6.0}))
    out = run(tmp_path, lines)
    assert len(out) == 1
    assert out[0].startswith('    {6144, 4096, 1, P("wgA/2"), P("wgA/2")},')
    assert "pc wgA/2 5.0" in out[0]


def test_a_split_the_planner_would_change_is_skipped(tmp_path):
    # k = 1152: 9 blocks; 4 splits -> 3 blocks each -> 3 splits: not reproducible.
    lines = [sweep(2048, 1152, kind, 32, {"wgA/4": 3.0, "wgC-k256/3": 3.5}) for kind in ("pc", "g128")]
    out = run(tmp_path, lines)
    assert len(out) == 1
    assert 'P("wgC-k256/3"), P("wgC-k256/3")' in out[0]


def test_an_entry_stays_unless_beaten_by_the_margin(tmp_path):
    close = [sweep(4096, 4096, kind, 16, {"wgA/2": 5.0, "wgB/2": 4.95}) for kind in ("pc", "g128")]
    assert run(tmp_path, close) == []
    far = [sweep(4096, 4096, kind, 16, {"wgA/2": 5.0, "wgB/3": 4.0}) for kind in ("pc", "g128")]
    out = run(tmp_path / "b", far)
    assert len(out) == 1 and 'P("wgB/3")' in out[0]


def test_stream_k_choices_and_entries(tmp_path):
    # "sk" in a sweep (stream-K) wins and is written as NAME/sk; an entry of the table with it
    # reads back.
    lines = [sweep(4096, 14336, kind, 256, {"wgA/2": 36.0, "wgB/sk": 32.0}) for kind in ("pc", "g128")]
    out = run(tmp_path, lines)
    assert len(out) == 1 and out[0].startswith('    {4096, 14336, 256, P("wgB/sk"), P("wgB/sk")},')
    t = refit_module()
    (tmp_path / "r/src/backend/cuda").mkdir(parents=True)
    (tmp_path / "r/src/backend/cuda/gemm_w4a8_measured.cpp").write_text(
        '    {4096, 14336, 256, P("wgA/2"), P("wgB/sk")},  // x\n')
    assert t.table_entries(str(tmp_path / "r")) == {(4096, 14336, 256): {"pc": ("wgA", 2), "g128": ("wgB", "sk")}}


def test_with_neighbor_sweeps_a_choice_must_win_after_the_neighbor(tmp_path):
    # The table's entry is wgA/2 (4096 x 4096, bucket 16). wgB/3 is 20% faster back to back.
    b2b = [sweep(4096, 4096, kind, 16, {"wgA/2": 5.0, "wgB/3": 4.0, "wgC-k256/2": 5.1}) for kind in ("pc", "g128")]
    # ... but after a neighbor as slow as the entry: the entry stays.
    even = [sweep(4096, 4096, kind, 16, {"wgA/2": 6.0, "wgB/3": 6.0, "wgC-k256/2": 6.5}) for kind in ("pc", "g128")]
    assert run(tmp_path / "a", b2b, neighbor=even) == []
    # Faster in both patterns: it replaces the entry, with both times in the comment.
    both = [sweep(4096, 4096, kind, 16, {"wgA/2": 6.0, "wgB/3": 5.0, "wgC-k256/2": 6.5}) for kind in ("pc", "g128")]
    out = run(tmp_path / "b", b2b, neighbor=both)
    assert len(out) == 1 and out[0].startswith('    {4096, 4096, 16, P("wgB/3"), P("wgB/3")},')
    assert "pc wgB/3 4.0, 5.0 after a neighbor" in out[0]
    # Fastest after the neighbor (wgC) but 2% slower back to back: within --max-loss 0.03, not 0.01.
    nb_c = [sweep(4096, 4096, kind, 16, {"wgA/2": 6.0, "wgB/3": 6.0, "wgC-k256/2": 5.0}) for kind in ("pc", "g128")]
    out = run(tmp_path / "c", b2b, "--max-loss", "0.03", neighbor=nb_c)
    assert len(out) == 1 and 'P("wgC-k256/2"), P("wgC-k256/2")' in out[0]
    assert run(tmp_path / "d", b2b, "--max-loss", "0.01", neighbor=nb_c) == []


def test_shipped_times_stand_for_entries_the_sweep_did_not_time(tmp_path):
    # A sweep of wgB/3 alone (the entry wgA/2 not timed): without --shipped the entry stays ("not swept").
    lines = [sweep(4096, 4096, kind, 16, {"wgB/3": 4.5}) for kind in ("pc", "g128")]
    assert run(tmp_path / "a", lines) == []

    def shipped(path, pc_us, g_us, m=16):
        row = {"model": "x", "layer": "y", "m": m, "n": 4096, "k": 4096, "shipped_per_channel_plan": "wgA/2",
               "shipped_per_channel_us": pc_us, "shipped_g128_plan": "wgA/2", "shipped_g128_us": g_us}
        path.write_text(json.dumps([row, dict(row, m=999)]))  # (m = 999: a row no sweep covers, ignored)
        return str(path)

    # The same run's JSON: per-channel's entry took 5.0 (wgB/3 10% faster: replaced), g128's 4.55 (within
    # the margin: kept).
    tmp_path.joinpath("b").mkdir()
    out = run(tmp_path / "b", lines, "--shipped", shipped(tmp_path / "b" / "run.json", 5.0, 4.55))
    assert len(out) == 1 and out[0].startswith('    {4096, 4096, 16, P("wgB/3"), P("wgA/2")},')
    # With neighbor sweeps, each pattern's own JSON: after the neighbor wgB/3 is no faster, so both stay.
    tmp_path.joinpath("c").mkdir()
    nb = [sweep(4096, 4096, kind, 16, {"wgB/3": 6.0}) for kind in ("pc", "g128")]
    out = run(tmp_path / "c", lines, "--shipped", shipped(tmp_path / "c" / "b2b.json", 5.0, 5.0),
              "--neighbor-shipped", shipped(tmp_path / "c" / "nb.json", 6.0, 6.0), neighbor=nb)
    assert out == []


def test_overrides_print_the_changed_kinds_only(tmp_path):
    lines = [sweep(4096, 4096, "pc", 16, {"wgA/2": 5.0, "wgB/3": 4.0}),
             sweep(4096, 4096, "g128", 16, {"wgA/2": 5.0, "wgB/3": 4.99})]
    assert run(tmp_path, lines, "--overrides") == ["4096x4096@16:pc=wgB/3"]


def test_the_repository_files_parse():
    t = refit_module()
    names = t.tile_names(str(ROOT))
    assert names[0] == "128x8" and "wg128x8c-k256" in names
    table = t.table_entries(str(ROOT))
    src = (ROOT / "src/backend/cuda/gemm_w4a8_measured.cpp").read_text()
    rows = src[src.index("kTable[] = {"):].split("};")[0].count("\n    {")
    assert len(table) == rows  # every row of kTable parsed
    assert (4096, 4096, 1) in table and all(c[0] in names for e in table.values() for c in e.values())


def test_the_table_comments_name_the_plans_of_their_entries():
    """Each kTable entry's comment names its plans ("pc NAME/S ..; g128 NAME/S .."; a decode
    kernel's without "/1"; "NAME/S: pc .., g128 .." for one plan of both kinds; "g128 T" alone for
    the per-channel plan), so that an entry edited without its comment fails here."""
    t = refit_module()
    src = (ROOT / "src/backend/cuda/gemm_w4a8_measured.cpp").read_text()
    checked = 0
    for line in src[src.index("kTable[] = {"):].split("};")[0].splitlines():
        m = t.ENTRY_RE.match(line)
        if not m:
            continue
        comment = line.split("//", 1)[1]
        v = m.groups()
        shared = re.match(r"\s*(\S+?)/(\w+): pc", comment)
        for kind, tile, splits in (("pc", v[3], v[4]), ("g128", v[5], v[6])):
            want = (tile, splits)
            if shared:
                got = (shared.group(1), shared.group(2))
            else:
                c = re.search(rf"\b{kind} ([\w.-]+?)(?:/(\w+))?[ ,;)]", comment)
                if kind == "g128" and (c is None or re.fullmatch(r"[\d.]+", c.group(1))):
                    c = re.search(r"\bpc ([\w.-]+?)(?:/(\w+))?[ ,;)]", comment)  # "g128 T": the same plan
                assert c, line
                got = (c.group(1), c.group(2) or "1")
            assert got == want, f"{kind}: the entry says {want}, the comment {got}: {line.strip()}"
            checked += 1
    assert checked == 2 * len(t.table_entries(str(ROOT)))
