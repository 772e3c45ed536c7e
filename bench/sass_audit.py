#!/usr/bin/env python3
"""SASS audit of the CUDA kernels: what each kernel's hot loop is made of.

For every kernel of the CUDA backend's static library in a build directory
(or of the files given with --files: objects, libraries, executables) this
reads `cuobjdump --dump-resource-usage` and `cuobjdump --dump-sass` and
reports:
  - registers, stack (local memory per thread) and static shared memory;
  - over the whole kernel: tensor-core instructions (IGMMA / HGMMA: wgmma;
    IMMA / HMMA: mma.sync), 16-byte global and shared loads, ldmatrix, local
    memory accesses (STL / LDL: spills), TMA and bulk copies;
  - the same counts inside the kernel's MMA loop: the smallest region between a
    backward branch and its target that holds a tensor-core instruction (the
    innermost loop that multiplies; unrolled loops count once per copy);
  - code size: the kernel's bytes and its MMA loop's (the loop's straight-line
    code, which each launch fetches into the SM's instruction caches again once
    other kernels ran in between: an engine cost that back-to-back timings do
    not show, round 48 in docs/gemm-hopper.md);
  - for the register-A W4 wgmma loops (16-byte shared loads of packed 4-bit
    weights, 32 weights each, and wgmma in one loop): the vector ALU
    instructions of the loop (all but tensor-core, memory, control and
    uniform-datapath ones) per 4 weights, with the opcodes that make them up:
    what unpacking and dequantization cost a consumer thread.
No GPU is needed. cuobjdump comes with the CUDA toolkit, or from PyPI
(`pip install nvidia-cuda-cuobjdump`: site-packages/nvidia/cu13/bin/cuobjdump).

  bench/sass_audit.py BUILD_DIR [--files F ...] [--filter REGEX] [--json OUT] [--cuobjdump PATH]
                      [--compare BASE.json]

--compare BASE.json: a --json file of another build (the baseline); after the
table, the kernels whose code or MMA-loop size differs from it (bytes, base ->
this build), those in one build only, and the total code bytes per object.
"""
import argparse
import collections
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig

# Counted instruction classes: name -> predicate on the opcode (the first word
# of the instruction after an optional predicate guard).
CLASSES = {
    "wgmma": lambda op: op.startswith(("IGMMA", "HGMMA", "QGMMA")),
    "mma_sync": lambda op: op.startswith(("IMMA", "HMMA")),
    "ldg128": lambda op: op.startswith("LDG.") and ".128" in op,  # (not LDGSTS: cp.async)
    "ldg": lambda op: op == "LDG" or op.startswith("LDG."),
    "lds128": lambda op: op.startswith("LDS.") and ".128" in op,  # (not LDSM: ldmatrix)
    "ldsm": lambda op: op.startswith("LDSM"),
    "ldgsts": lambda op: op.startswith("LDGSTS"),
    "local": lambda op: op.startswith(("STL", "LDL")),
    "tma": lambda op: op.startswith(("UTMALDG", "UTMASTG", "UBLKCP", "UTMAPF")),
    "bar": lambda op: op.startswith("BAR"),
}

# Not vector ALU work: tensor-core, memory, synchronization and control
# instructions, and the uniform datapath (U*: one per warp, beside the vector
# pipes; the TMA and uniform-register opcodes also start with U).
NOT_VALU = ("IGMMA", "HGMMA", "QGMMA", "IMMA", "HMMA", "LD", "ST", "ATOM", "RED", "SYNCS", "BAR", "BRA", "BRX",
            "WARPGROUP", "WARPSYNC", "DEPBAR", "NOP", "EXIT", "RET", "CALL", "VOTE", "S2R", "S2UR", "CS2R",
            "MEMBAR", "FENCE", "ELECT", "YIELD", "BSSY", "BSYNC", "ERRBAR", "CCTL", "ACQBULK", "R2UR")


def is_valu(op):
    return not op.startswith(NOT_VALU) and not op.startswith("U")

INSN = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)(.*?);")
BRANCH_TARGET = re.compile(r"\b(?:BRA|BRX)\b[^;]*?(0x[0-9a-f]+)")


def find_cuobjdump(given):
    if given:
        return given
    found = shutil.which("cuobjdump")
    if found:
        return found
    site = sysconfig.get_paths()["purelib"]
    for cand in glob.glob(os.path.join(site, "nvidia", "cu*", "bin", "cuobjdump")):
        return cand
    sys.exit("cuobjdump not found: put it on PATH, pass --cuobjdump, or pip install nvidia-cuda-cuobjdump")


def demangle(names):
    if not names:
        return {}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.split("\n")
    return dict(zip(names, out))


MEMBER = re.compile(r"^member \S*?:([^:]+):$")


def parse_resource_usage(text):
    """`cuobjdump --dump-resource-usage` text -> {(archive member or "", mangled name): resources}"""
    usage, name, member = {}, None, ""
    for line in text.splitlines():
        m = MEMBER.match(line)
        if m:
            member = m.group(1)
            continue
        m = re.match(r"\s*Function (\S+):", line)
        if m:
            name = m.group(1)
            continue
        if name and "REG:" in line:
            fields = dict(re.findall(r"([A-Z]+(?:\[\d+\])?):(\d+)", line))
            usage[(member, name)] = {"registers": int(fields.get("REG", 0)), "stack": int(fields.get("STACK", 0)),
                           "shared": int(fields.get("SHARED", 0)), "local": int(fields.get("LOCAL", 0))}
            name = None
    return usage


def parse_sass(text):
    """`cuobjdump --dump-sass` text -> {(archive member or "", mangled name): [(address, opcode,
    branch target or None)]}"""
    funcs, name, member = {}, None, ""
    for line in text.splitlines():
        m = MEMBER.match(line)
        if m:
            member, name = m.group(1), None
            continue
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            name = (member, m.group(1))
            funcs[name] = []
            continue
        if name is None:
            continue
        m = INSN.match(line)
        if m:
            addr, op, rest = int(m.group(1), 16), m.group(2), m.group(3)
            t = BRANCH_TARGET.search(op + rest)
            funcs[name].append((addr, op, int(t.group(1), 16) if t else None))
    return funcs


def cuobjdump(tool, what, obj):
    return subprocess.run([tool, what, obj], capture_output=True, text=True, check=True).stdout


def count(insns):
    return {k: sum(1 for _, op, _ in insns if pred(op)) for k, pred in CLASSES.items()}


def code_bytes(insns):
    """Bytes from the first instruction to the end of the last (16-byte instructions on sm_70 and later)."""
    return insns[-1][0] - insns[0][0] + 16 if insns else 0


def compare(records, base_path):
    """Lines of the size comparison against a baseline --json file (see --compare)."""
    base = {}
    with open(base_path) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                base[(r["object"], r["kernel"])] = r
    new = {(r["object"], r["kernel"]): r for r in records}

    def loop_bytes(r):
        return (r.get("mma_loop") or {}).get("bytes", 0)

    out = ["", "| kernel | code bytes | MMA loop bytes |", "|---|---|---|"]
    for key in sorted(new.keys() & base.keys()):
        a, b = base[key], new[key]
        if (a.get("bytes"), loop_bytes(a)) != (b.get("bytes"), loop_bytes(b)):
            out.append(f"| {short_name(key[1])} | {a.get('bytes', '?')} -> {b.get('bytes', '?')} | "
                       f"{loop_bytes(a)} -> {loop_bytes(b)} |")
    for key in sorted(new.keys() - base.keys()):
        out.append(f"| {short_name(key[1])} (new) | {new[key].get('bytes', '?')} | {loop_bytes(new[key])} |")
    for key in sorted(base.keys() - new.keys()):
        out.append(f"| {short_name(key[1])} (gone) | {base[key].get('bytes', '?')} | {loop_bytes(base[key])} |")
    def per_object(recs):
        sizes = collections.Counter()
        for (obj, _), r in recs.items():
            sizes[obj] += r.get("bytes", 0)
        return sizes

    def change(a, b):
        return f"{a} -> {b} ({(b / a - 1) * 100 if a else 0:+.1f}%)"

    sa, sb = per_object(base), per_object(new)
    kernels = collections.Counter(obj for obj, _ in new)
    out += ["", "| object | kernels | code bytes, base -> this build |", "|---|---|---|"]
    for obj in sorted(sa.keys() | sb.keys()):
        out.append(f"| {obj} | {kernels[obj]} | {change(sa[obj], sb[obj])} |")
    out.append(f"| all | {len(new)} | {change(sum(sa.values()), sum(sb.values()))} |")
    return out


def short_name(kernel):
    return re.sub(r"\(.*\)$", "", kernel).replace("qserve::cuda::", "")


def mma_loop(insns):
    """The smallest backward-branch region holding a tensor-core instruction."""
    mma_addrs = [a for a, op, _ in insns if CLASSES["wgmma"](op) or CLASSES["mma_sync"](op)]
    best = None
    for addr, _, target in insns:
        if target is None or target >= addr:
            continue
        if any(target <= a <= addr for a in mma_addrs) and (best is None or addr - target < best[1] - best[0]):
            best = (target, addr)
    if best is None:
        return None
    body = [i for i in insns if best[0] <= i[0] <= best[1]]
    loop = {"instructions": len(body), "bytes": code_bytes(body), **count(body)}
    valu = [op.split(".")[0] for _, op, _ in body if is_valu(op)]
    loop["valu"] = len(valu)
    if loop["wgmma"] and loop["lds128"]:  # register-A W4: 32 weights per 16-byte load
        loop["valu_per_4_weights"] = round(len(valu) / (loop["lds128"] * 8), 2)
        loop["valu_opcodes"] = dict(sorted(collections.Counter(valu).items(), key=lambda kv: -kv[1]))
    return loop


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build_dir")
    ap.add_argument("--files", nargs="*", help="files to read instead of BUILD_DIR/src/libqs_backend_cuda.a")
    ap.add_argument("--filter", default="", help="regex on the demangled kernel name")
    ap.add_argument("--json", help="write one record per kernel (JSON lines)")
    ap.add_argument("--cuobjdump")
    ap.add_argument("--compare", help="a --json file of a baseline build: code sizes against it")
    args = ap.parse_args()
    tool = find_cuobjdump(args.cuobjdump)
    objs = args.files or [os.path.join(args.build_dir, "src", "libqs_backend_cuda.a")]
    for obj in objs:
        if not os.path.exists(obj):
            sys.exit(f"{obj}: not found (a CUDA build: cmake -DQSERVE_CUDA=ON)")
    records = []
    for obj in objs:
        usage = parse_resource_usage(cuobjdump(tool, "--dump-resource-usage", obj))
        funcs = parse_sass(cuobjdump(tool, "--dump-sass", obj))
        names = demangle(sorted({k[1] for k in funcs}))
        for (member, mangled), insns in funcs.items():
            name = names.get(mangled, mangled)
            if args.filter and not re.search(args.filter, name):
                continue
            rec = {"object": member or os.path.basename(obj), "kernel": name, **usage.get((member, mangled), {}),
                   "instructions": len(insns), "bytes": code_bytes(insns), "whole": count(insns),
                   "mma_loop": mma_loop(insns)}
            records.append(rec)
    cols = ["wgmma", "mma_sync", "ldg128", "lds128", "ldsm", "local"]
    print("| kernel | regs | stack | code bytes / MMA loop bytes | whole: " + " / ".join(cols) +
          " | MMA loop: instructions / " + " / ".join(cols) + " | vector ALU per 4 weights |")
    print("|---|---|---|---|---|---|---|")
    for r in records:
        loop = r["mma_loop"]
        print(f"| {short_name(r['kernel'])} | {r.get('registers', '?')} | {r.get('stack', '?')} | "
              f"{r['bytes']} / {(loop or {}).get('bytes', '-')} | "
              + " / ".join(str(r["whole"][c]) for c in cols) + " | "
              + ("-" if loop is None else f"{loop['instructions']} / " + " / ".join(str(loop[c]) for c in cols)) + " | "
              + str((loop or {}).get("valu_per_4_weights", "-")) + " |")
    if args.compare:
        print("\n".join(compare(records, args.compare)))
    if args.json:
        with open(args.json, "w") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
