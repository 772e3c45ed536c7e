"""bench/sass_audit.py: the parsers and the MMA-loop finder on a synthetic cuobjdump dump (no
CUDA toolkit needed)."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("sass_audit", ROOT / "bench" / "sass_audit.py")
sa = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sa)

USAGE = """
member lib.a:k.cu.o:
Resource usage:
 Common:
  GLOBAL:0
 Function _Z3fooPi:
  REG:168 STACK:8 SHARED:1024 LOCAL:0 CONSTANT[0]:600 TEXTURE:0 SURFACE:0 SAMPLER:0
"""

# A kernel with an outer loop (0x0040 .. 0x00d0) around an inner MMA loop (0x0060 .. 0x00a0),
# a spill before the loops and a forward branch that is not a loop.
SASS = """
member lib.a:k.cu.o:
\t\tFunction : _Z3fooPi
        /*0000*/                   LDC R1, c[0x0][0x28] ;                 /* 0x00000a00ff017b82 */
        /*0010*/                   STL [R1], R2 ;                         /* 0x0000000201007387 */
        /*0020*/              @P0  BRA 0xe0 ;                             /* 0x0000000000000947 */
        /*0030*/                   LDG.E.128.CONSTANT R4, desc[UR4][R2.64] ;
        /*0040*/                   LDS R8, [R3] ;
        /*0050*/                   LDL R2, [R1] ;
        /*0060*/                   LDS.128 R8, [R3] ;
        /*0068*/                   LDGSTS.E.128 [R5], desc[UR4][R2.64] ;
        /*0070*/                   LDSM.16.M88.4 R12, [R3] ;
        /*0080*/                   IGMMA.64x16x32.S8.S8 R24, R8, gdesc[UR4], R24 ;
        /*0090*/                   IMMA.16832.S8.S8 R30, R8, R12, R30 ;
        /*00a0*/              @P1  BRA 0x60 ;
        /*00b0*/                   LDG.E.128 R4, desc[UR4][R2.64] ;
        /*00c0*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*00d0*/              @P2  BRA 0x40 ;
        /*00e0*/                   EXIT ;
"""


def test_resource_usage():
    u = sa.parse_resource_usage(USAGE)
    assert u == {("k.cu.o", "_Z3fooPi"): {"registers": 168, "stack": 8, "shared": 1024, "local": 0}}


def test_counts_and_innermost_mma_loop():
    funcs = sa.parse_sass(SASS)
    insns = funcs[("k.cu.o", "_Z3fooPi")]
    assert len(insns) == 16
    whole = sa.count(insns)
    assert whole["wgmma"] == 1 and whole["mma_sync"] == 1
    assert whole["ldg128"] == 2 and whole["ldg"] == 2
    assert whole["lds128"] == 1 and whole["ldsm"] == 1 and whole["ldgsts"] == 1
    assert whole["local"] == 2 and whole["bar"] == 1
    loop = sa.mma_loop(insns)
    # the inner loop 0x60 .. 0xa0, not the outer one nor the forward branch
    assert loop["instructions"] == 6
    assert loop["wgmma"] == 1 and loop["lds128"] == 1 and loop["ldsm"] == 1
    assert loop["local"] == 0 and loop["ldg128"] == 0 and loop["ldgsts"] == 1


def test_no_loop_without_mma():
    insns = sa.parse_sass(SASS.replace("IGMMA.64x16x32.S8.S8", "IADD3").replace("IMMA.16832.S8.S8", "IADD3"))
    assert sa.mma_loop(insns[("k.cu.o", "_Z3fooPi")]) is None


# A register-A W4 loop: one 16-byte weight load (32 weights), the unpack on the
# vector pipes, uniform-datapath bookkeeping and a barrier wait that do not count.
SASS_W4 = """
\t\tFunction : _Z3barPi
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R2 ;
        /*0020*/                   LDS.128 R8, [R3] ;
        /*0030*/                   LOP3.LUT R12, R8, 0xf0f0f0f, RZ, 0xc0, !PT ;
        /*0040*/                   SHF.R.U32.HI R13, RZ, 0x4, R8 ;
        /*0050*/                   LOP3.LUT R13, R13, 0xf0f0f0f, RZ, 0xc0, !PT ;
        /*0060*/                   IMAD R12, R12, R5, R6 ;
        /*0070*/                   UIADD3 UR4, UR4, 0x1, URZ ;
        /*0080*/                   WARPGROUP.ARRIVE ;
        /*0090*/                   IGMMA.64x16x32.S8.S8 R24, R12, gdesc[UR4], R24 ;
        /*00a0*/              @P1  BRA 0x10 ;
        /*00b0*/                   EXIT ;
"""


def test_vector_alu_per_4_weights():
    insns = sa.parse_sass(SASS_W4)[("", "_Z3barPi")]
    loop = sa.mma_loop(insns)
    assert loop["instructions"] == 10 and loop["lds128"] == 1 and loop["wgmma"] == 1
    # LOP3 x 2, SHF, IMAD: 4 vector ALU instructions for 32 weights
    assert loop["valu"] == 4
    assert loop["valu_per_4_weights"] == 0.5
    assert loop["valu_opcodes"] == {"LOP3": 2, "SHF": 1, "IMAD": 1}
    # a loop without 16-byte weight loads has no per-weight figure
    plain = sa.mma_loop(sa.parse_sass(SASS_W4.replace("LDS.128", "LDS"))[("", "_Z3barPi")])
    assert "valu_per_4_weights" not in plain and plain["valu"] == 4


def test_code_bytes_of_kernel_and_loop():
    insns = sa.parse_sass(SASS)[("k.cu.o", "_Z3fooPi")]
    assert sa.code_bytes(insns) == 0xe0 + 16           # 0x0000 .. EXIT at 0x00e0
    assert sa.mma_loop(insns)["bytes"] == 0xa0 - 0x60 + 16  # the inner loop, its branch included
    assert sa.code_bytes([]) == 0


def test_compare_lists_changed_new_and_gone_kernels_and_object_totals(tmp_path):
    import json

    def rec(obj, kernel, size, loop):
        return {"object": obj, "kernel": kernel, "bytes": size, "mma_loop": None if loop is None else {"bytes": loop}}

    base = [rec("a.o", "k1(int)", 1000, 200), rec("a.o", "k2(int)", 500, None), rec("b.o", "old(int)", 300, 100)]
    new = [rec("a.o", "k1(int)", 1400, 600), rec("a.o", "k2(int)", 500, None), rec("b.o", "fresh(int)", 200, 50)]
    f = tmp_path / "base.json"
    f.write_text("\n".join(json.dumps(r) for r in base) + "\n")
    lines = sa.compare(new, str(f))
    text = "\n".join(lines)
    assert "| k1 | 1000 -> 1400 | 200 -> 600 |" in text
    assert "k2" not in text                       # unchanged: not listed
    assert "| fresh (new) | 200 | 50 |" in text and "| old (gone) | 300 | 100 |" in text
    assert "| a.o | 2 | 1500 -> 1900 (+26.7%) |" in text
    assert "| b.o | 1 | 300 -> 200 (-33.3%) |" in text
    assert "| all | 3 | 1800 -> 2100 (+16.7%) |" in text
