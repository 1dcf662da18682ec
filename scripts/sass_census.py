#!/usr/bin/env python3
"""SASS census: instruction classes of a kernel's main loop, per unit of work.

Developer tool (stdlib only, no GPU). Input: disassembly text from `cuobjdump -sass` (cubin, fatbin
or executable/library) or `nvdisasm` (with or without -c), optionally .xz-compressed. For each
function whose name (mangled, or demangled when c++filt is on PATH) matches --kernel, it finds
the main loop and counts the instructions of its body per class (tensor, LDSM, LDS, STS, LDGSTS,
FFMA, ..., see CLASSES), then divides the counts by --tile-units.

Main loop: the control-flow graph of the function is built (basic blocks; conditional branches,
EXIT, RET, CALL handled), loops are the natural loops of its back edges (a branch to a block that
dominates it: in practice a BRA to an earlier address), merged per header. The main loop is the
loop holding the most tensor-core instructions (HMMA/IMMA/QMMA/...GMMA/...); on a tie the smaller
body wins (an enclosing loop that adds no tensor instruction, e.g. a persistent-tile loop or a
back edge of an out-of-line slow path, is not the main loop). When that loop contains inner loops
the whole outer body is counted (static instruction counts, each instruction once) and the inner
loops are named in the "nested" row. --loop ADDR picks the loop whose header is at ADDR instead.
Without dominator-based loops (irreducible code) the loop is the address range from the target
of a backward BRA to the BRA.

--tile-units N: units of work one iteration of that loop does PER WARP, one unit = 64 query rows
x 64 keys (SASS is the per-warp instruction stream). E.g. a 64x64 CTA tile with 4 warps of 16 rows:
0.25; a 128x64 tile with 4 warps of 32 rows: 0.5. Counts shown = loop counts / N.

Columns: one per selected function of each input (or a census JSON written by --json, whose
columns are reused). --label, --tile-units and --arch may be given once (all columns) or once per
column, in order; --res once (all inputs) or once per input file. --res: `cuobjdump -res-usage`
output ("REG:NN STACK:.. SHARED:.. LOCAL:.."); without it the register count comes from nvdisasm's
SHI_REGISTERS when present. Spills: STL/LDL anywhere in the function, LOCAL > 0 in --res.

Usage:
  scripts/sass_census.py SASS[.xz]|CENSUS.json ... [--kernel REGEX] [--tile-units N]... [--label L]...
                         [--res FILE]... [--arch sm_80]... [--loop 0xADDR] [--raw] [--detail]
                         [--json OUT.json]
  e.g. scripts/sass_census.py /tmp/census/sm80/*d64*none*.sass --kernel attention_mma \\
         --tile-units 0.25 --res /tmp/census/sm80/*d64*none*.res --label sage2-sm80-d64
"""
import argparse
import collections
import json
import lzma
import os
import re
import shutil
import subprocess
import sys

# ---------------------------------------------------------------------------------------------
# instruction classes (order = row order of the table)

TENSOR = {"HMMA", "IMMA", "QMMA", "OMMA", "DMMA", "BMMA", "HGMMA", "IGMMA", "QGMMA", "BGMMA",
          "UTCHMMA", "UTCIMMA", "UTCQMMA", "UTCOMMA", "UTCMMA"}
INT_ALU = {"IMAD", "IADD3", "IADD", "IADD32I", "LOP3", "LOP", "LOP32I", "SHF", "SHL", "SHR", "LEA", "ISETP",
           "IABS", "IMNMX", "VIMNMX", "VIADD", "VIADDMNMX", "SEL", "PRMT", "POPC", "FLO", "BREV", "IMUL",
           "IMUL32I", "BMSK", "SGXT", "IDP", "IDP4A", "IMAD32I", "ICMP", "ISCADD", "XMAD", "PLOP3",
           "P2R", "R2P", "PSETP", "ISET", "BFE", "BFI", "IMNMX3", "VABSDIFF", "VABSDIFF4"}
CONV = {"F2F", "F2FP", "I2F", "I2FP", "F2I", "F2IP", "I2I", "I2IP", "FRND"}
HALF = {"HADD2", "HMUL2", "HFMA2", "HMNMX2", "HSETP2", "HSET2", "HADD2_32I", "HMUL2_32I", "HFMA2_32I"}
OTHER_FLOAT = {"FSETP", "FSEL", "FSET", "FCHK", "FSWZADD", "FCMP", "FMUL32I", "FADD32I", "FFMA32I",
               "FMNMX3", "FADD2", "FMUL2", "FFMA2", "DADD", "DMUL", "DFMA", "DSETP"}

# (key, table label); "shared" and "global" are sums, "total" counts everything but NOP.
CLASSES = [
    ("tensor", "tensor (HMMA/IMMA/QMMA/GMMA)"),
    ("ldsm", "LDSM"),
    ("ldsm_t", "  of which LDSM .MT88 (transposed)"),
    ("lds", "LDS"),
    ("sts", "STS"),
    ("shared", "shared total (LDSM+LDS+STS+ATOMS)"),
    ("ldgsts", "LDGSTS (cp.async)"),
    ("ldg", "LDG"),
    ("stg", "STG"),
    ("ffma", "FFMA"),
    ("fmul", "FMUL"),
    ("fadd", "FADD"),
    ("fmnmx", "FMNMX"),
    ("float_other", "other float ALU (FSETP, FSEL, ...)"),
    ("int", "integer ALU (IMAD, IADD3, LOP3, SHF, LEA, ISETP, SEL, PRMT, ...)"),
    ("uniform", "uniform datapath (U*: UIADD3, ULDC, ...)"),
    ("mufu", "MUFU"),
    ("conv", "conversions (F2F, F2FP, I2F(P), F2I, I2I)"),
    ("half", "half ALU (HADD2, HMUL2, HFMA2, ...)"),
    ("shfl", "SHFL"),
    ("bar", "BAR (barriers)"),
    ("depbar", "DEPBAR / LDGDEPBAR"),
    ("bra", "BRA"),
    ("mov", "MOV (+ IMAD.MOV, HFMA2.MMA -RZ,RZ consts)"),
    ("other", "other (S2R, CS2R, BSSY/BSYNC, ...)"),
    ("total", "total (no NOP, no @!PT)"),
]
SUMS = {"shared", "total", "ldsm_t"}


def base_op(op):
    return op.split(".")[0]


# Opcodes (without modifiers) of one class each; the sets above and the special cases in
# classify() cover the rest.
BY_OPCODE = {
    "LDSM": "ldsm", "LDS": "lds", "STS": "sts",
    "ATOMS": "sts",  # a shared-memory write; rare in the loops measured here
    "LDGSTS": "ldgsts", "LDG": "ldg", "LD": "ldg", "LDGMC": "ldg",
    "STG": "stg", "ST": "stg", "RED": "stg", "ATOMG": "stg", "ATOM": "stg",
    "FFMA": "ffma", "FMUL": "fmul", "FADD": "fadd", "FMNMX": "fmnmx",
    "MOV": "mov", "MOV32I": "mov", "MUFU": "mufu", "SHFL": "shfl",
    "BAR": "bar", "BARRIER": "bar", "SYNCS": "bar", "DEPBAR": "depbar", "LDGDEPBAR": "depbar",
    "BRA": "bra", "NOP": "nop",
}
BY_SET = (("float_other", OTHER_FLOAT), ("int", INT_ALU), ("conv", CONV), ("half", HALF))


def classify(op, operands=""):
    """The class key of one instruction (opcode with modifiers, operand text)."""
    b = base_op(op)
    if b in TENSOR:
        return "tensor"
    if op.startswith("IMAD.MOV"):
        return "mov"
    if b == "HFMA2" and ".MMA" in op and re.match(r"\s*\S+,\s*-RZ,\s*RZ\b", operands):
        return "mov"  # `HFMA2.MMA Rd, -RZ, RZ, imm, imm`: a constant materialised on the FMA pipe
    if b in BY_OPCODE:
        return BY_OPCODE[b]
    for cls, members in BY_SET:
        if b in members:
            return cls
    if b.startswith("U"):
        return "uniform"
    return "other"


# ---------------------------------------------------------------------------------------------
# parsing

INSN_RE = re.compile(r"^\s*/\*([0-9a-fA-F]{4,})\*/\s+(?:\{\s*)?([^;{}]*?)\s*;")
LABEL_RE = re.compile(r"^\s*([.$\w]+):\s*(?://.*)?$")
PRED_RE = re.compile(r"^@(!?)(U?P[T0-9]+)\s+")
FUNC_CUOBJ_RE = re.compile(r"^\s*Function\s*:\s*(\S+)")
FUNC_NVDIS_RE = re.compile(r"^\s*\.text\.(\S+):\s*$")
ARCH_RE = re.compile(r"(?:code for|arch =|\.target)\s+(sm_\w+)")
REG_RE = re.compile(r'SHI_REGISTERS=(\d+)')


class Insn:
    __slots__ = ("addr", "text", "pred", "op", "operands", "cls")

    def __init__(self, addr, text):
        self.addr, self.text = addr, text
        m = PRED_RE.match(text)
        self.pred = (m.group(1) + m.group(2)) if m else ""
        body = text[m.end():] if m else text
        parts = body.split(None, 1)
        self.op = parts[0] if parts else ""
        self.operands = parts[1] if len(parts) > 1 else ""
        # `@!PT` / `@!UPT`: never executed (scheduling padding such as `@!PT LDS RZ, [RZ]`): NOP
        self.cls = "nop" if self.pred in ("!PT", "!UPT") else classify(self.op, self.operands)


class Function:
    def __init__(self, name, arch):
        self.name, self.arch = name, arch
        self.insns = []
        self.labels = {}  # label -> address of the next instruction


def read_text(path):
    if path.endswith(".xz"):
        with lzma.open(path, "rt", errors="replace") as f:
            return f.read()
    with open(path, errors="replace") as f:
        return f.read()


def parse_sass(text):
    """Functions of a cuobjdump -sass or nvdisasm listing, in order."""
    funcs, cur, arch, pending = [], None, None, []
    for line in text.splitlines():
        m = INSN_RE.match(line)
        if m:
            if cur is None:
                cur = Function("?", arch)
                funcs.append(cur)
            addr = int(m.group(1), 16)
            for lab in pending:
                cur.labels[lab] = addr
            pending = []
            cur.insns.append(Insn(addr, m.group(2).strip()))
            continue
        m = FUNC_CUOBJ_RE.match(line) or FUNC_NVDIS_RE.match(line)
        if m:
            cur = Function(m.group(1), arch)
            funcs.append(cur)
            pending = []
            continue
        m = ARCH_RE.search(line)
        if m and not line.lstrip().startswith("/*"):
            arch = m.group(1)
            if cur is not None and not cur.insns:
                cur.arch = arch
            continue
        m = LABEL_RE.match(line)
        if m and cur is not None:
            pending.append(m.group(1))
    return [f for f in funcs if f.insns]


def parse_nvdisasm_registers(text):
    """nvdisasm: {function name: SHI_REGISTERS} (the .sectioninfo line precedes `.text.NAME:`)."""
    out, sec = {}, None
    for line in text.splitlines():
        m = re.search(r"\.section\s+\.text\.([^,\s]+)", line)
        if m:
            sec = m.group(1)
        m = REG_RE.search(line)
        if m and sec:
            out[sec] = int(m.group(1))
    return out


def parse_res(text):
    """cuobjdump -res-usage: {(arch or None, function): {REG, STACK, SHARED, LOCAL, ...}}."""
    out, arch, fn = {}, None, None
    for line in text.splitlines():
        m = re.search(r"arch\s*=\s*(sm_\w+)", line)
        if m:
            arch = m.group(1)
        m = re.match(r"^\s*Function\s+(\S+?):?\s*$", line)
        if m:
            fn = m.group(1)
            continue
        if fn and "REG:" in line:
            vals = {k: int(v) for k, v in re.findall(r"([A-Z]+(?:\[\d+\])?):(\d+)", line)}
            out[(arch, fn)] = vals
            out.setdefault((None, fn), vals)
            fn = None
    return out


def demangle(names):
    tool = shutil.which("c++filt") or shutil.which("llvm-cxxfilt")
    if not tool or not names:
        return {n: n for n in names}
    try:
        r = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True, timeout=60)
        out = r.stdout.splitlines()
        if r.returncode == 0 and len(out) == len(names):
            return dict(zip(names, out))
    except (OSError, subprocess.SubprocessError):
        pass
    return {n: n for n in names}


# ---------------------------------------------------------------------------------------------
# control flow and loops

def branch_target(insn, labels):
    """Target address of a branch, or None (indirect / unknown)."""
    m = re.search(r"`\(([^)]+)\)", insn.operands)  # nvdisasm: `(.L_x_3)
    if m:
        return labels.get(m.group(1))
    m = re.search(r"(?:^|[\s,])(0x[0-9a-fA-F]+)\s*$", insn.operands)  # cuobjdump: last operand
    if m:
        return int(m.group(1), 16)
    return None


def build_cfg(insns, labels):
    """Basic blocks: list of (first index, last index), successor lists, entry block indices."""
    idx = {ins.addr: i for i, ins in enumerate(insns)}
    n = len(insns)
    leaders = {0}
    targets = {}
    call_targets = set()
    for i, ins in enumerate(insns):
        b = base_op(ins.op)
        if b in ("BRA", "JMP", "BRX", "JMX", "EXIT", "RET", "CALL", "BPT", "KILL"):
            if i + 1 < n:
                leaders.add(i + 1)
            if b in ("BRA", "JMP", "CALL"):
                t = branch_target(ins, labels)
                if t is not None and t in idx:
                    leaders.add(idx[t])
                    if b == "CALL":
                        call_targets.add(idx[t])
                    else:
                        targets[i] = idx[t]
    starts = sorted(leaders)
    blocks = [(s, (starts[k + 1] - 1) if k + 1 < len(starts) else n - 1) for k, s in enumerate(starts)]
    block_of = {}
    for bi, (s, e) in enumerate(blocks):
        for i in range(s, e + 1):
            block_of[i] = bi
    succ = [[] for _ in blocks]
    for bi, (s, e) in enumerate(blocks):
        last = insns[e]
        b = base_op(last.op)
        never = last.pred in ("!PT", "!UPT")
        uncond = last.pred in ("", "PT", "UPT")
        falls = True
        if never:
            pass
        elif b in ("BRA", "JMP"):
            if e in targets:
                succ[bi].append(block_of[targets[e]])
            falls = not uncond
        elif b in ("EXIT", "RET", "BRX", "JMX", "KILL"):
            falls = not uncond
        if falls and e + 1 < n:
            succ[bi].append(block_of[e + 1])
    entries = [0] + sorted(block_of[t] for t in call_targets)
    return blocks, succ, entries


def dominators(nb, succ, entries):
    """Dominator sets (as Python sets) of the blocks reachable from the entries; a virtual root
    joins the entries (a CALLed subroutine is an entry of its own)."""
    pred = [[] for _ in range(nb)]
    for b, ss in enumerate(succ):
        for s in ss:
            pred[s].append(b)
    reach, stack = set(), list(entries)
    while stack:
        b = stack.pop()
        if b in reach:
            continue
        reach.add(b)
        stack.extend(succ[b])
    order = sorted(reach)
    dom = {b: ({b} if b in entries else set(reach)) for b in order}
    changed = True
    while changed:
        changed = False
        for b in order:
            if b in entries:
                continue
            ps = [p for p in pred[b] if p in reach]
            new = set.intersection(*(dom[p] for p in ps)) if ps else set()
            new = new | {b}
            if new != dom[b]:
                dom[b], changed = new, True
    return dom, pred


def natural_loops(insns, labels):
    """Loops as dicts: header (address), blocks (set of block ids), indices (sorted instruction
    indices of the body), latches (addresses of the back-edge branches)."""
    if not insns:
        return []
    blocks, succ, entries = build_cfg(insns, labels)
    dom, pred = dominators(len(blocks), succ, entries)
    by_header = {}
    for b in dom:
        for h in succ[b]:
            if h in dom and h in dom[b]:  # back edge b -> h
                body, stack = {h, b}, [b]
                while stack:
                    x = stack.pop()
                    if x == h:
                        continue
                    for p in pred[x]:
                        if p in dom and p not in body:
                            body.add(p)
                            stack.append(p)
                L = by_header.setdefault(h, {"blocks": set(), "latches": []})
                L["blocks"] |= body
                L["latches"].append(insns[blocks[b][1]].addr)
    loops = []
    for h, L in by_header.items():
        idxs = sorted(i for bb in L["blocks"] for i in range(blocks[bb][0], blocks[bb][1] + 1))
        loops.append({"header": insns[blocks[h][0]].addr, "indices": idxs, "latches": sorted(L["latches"]),
                      "blocks": L["blocks"]})
    if not loops:  # fallback: address ranges of backward branches
        idx = {ins.addr: i for i, ins in enumerate(insns)}
        for i, ins in enumerate(insns):
            if base_op(ins.op) == "BRA":
                t = branch_target(ins, labels)
                if t is not None and t in idx and idx[t] <= i:
                    loops.append({"header": t, "indices": list(range(idx[t], i + 1)), "latches": [ins.addr],
                                  "blocks": set(range(idx[t], i + 1)), "range_only": True})
    return loops


def segments(insns, idxs):
    """Contiguous address ranges of a loop body, as text."""
    segs, start, prev = [], None, None
    for i in idxs:
        if start is None:
            start = prev = i
        elif i == prev + 1:
            prev = i
        else:
            segs.append((start, prev))
            start = prev = i
    if start is not None:
        segs.append((start, prev))
    return ", ".join(f"0x{insns[a].addr:04x}-0x{insns[b].addr:04x}" for a, b in segs)


# ---------------------------------------------------------------------------------------------
# census

def count(insns, idxs):
    c = collections.Counter()
    ops = collections.Counter()
    for i in idxs:
        ins = insns[i]
        c[ins.cls] += 1
        ops[ins.op] += 1
        if ins.cls == "ldsm" and ".MT88" in ins.op:
            c["ldsm_t"] += 1
    c["shared"] = c["ldsm"] + c["lds"] + c["sts"]
    c["total"] = sum(v for k, v in c.items() if k not in SUMS and k != "nop")
    return c, ops


def _skippable(insns, idxs, labels):
    """(branch index, region indices) of every conditional forward branch of the loop body whose
    target lies inside the body."""
    body = set(idxs)
    idx = {insns[i].addr: i for i in idxs}
    for i in idxs:
        ins = insns[i]
        if base_op(ins.op) != "BRA" or ins.pred in ("", "PT", "UPT", "!PT", "!UPT"):
            continue
        t = branch_target(ins, labels)
        if t is None or t <= ins.addr or t not in idx:
            continue
        region = [j for j in range(i + 1, idx[t]) if j in body]
        if region:
            yield i, region


def full_tile_total(insns, idxs, labels):
    """The loop's total without the skippable regions that hold neither a tensor op nor a copy
    into shared memory (LDGSTS): what an iteration over a full tile runs when such regions are the
    masking of a partial or diagonal tile (a kernel that peels those tiles has no such region)."""
    skip = set()
    for _, region in _skippable(insns, idxs, labels):
        c, _ = count(insns, region)
        if not c["tensor"] and not c["ldgsts"]:
            skip.update(region)
    c, _ = count(insns, [i for i in idxs if i not in skip])
    return c["total"]


def skippable_regions(insns, idxs, labels):
    """Regions of the loop body a conditional forward branch can jump over (target inside the
    body): dicts with the range, the instruction count and the class counts of the region. They
    are counted in the loop totals (static counts) but may run on some iterations only (e.g. the
    prefetch of the next tile, the masking of the last tile)."""
    out = []
    for i, region in _skippable(insns, idxs, labels):
        ins = insns[i]
        c, _ = count(insns, region)
        out.append({"range": f"0x{insns[region[0]].addr:04x}-0x{insns[region[-1]].addr:04x}",
                    "size": c["total"], "branch": f"0x{ins.addr:04x}",
                    "counts": {k: v for k, v in c.items() if v and k != "nop"}})
    return out


def census_function(fn, loop_addr=None):
    loops = natural_loops(fn.insns, fn.labels)
    for L in loops:
        L["tensor"] = sum(1 for i in L["indices"] if fn.insns[i].cls == "tensor")
        L["size"] = len(L["indices"])
    tensor_loops = [L for L in loops if L["tensor"]]
    if loop_addr is not None:
        cand = [L for L in loops if L["header"] == loop_addr]
        if not cand:
            raise SystemExit(f"{fn.name}: no loop with its header at 0x{loop_addr:x} "
                             f"(loops: {', '.join(hex(L['header']) for L in loops)})")
        main = cand[0]
    elif tensor_loops:
        main = max(tensor_loops, key=lambda L: (L["tensor"], -L["size"]))
    else:
        main = None
    res = {"function": fn.name, "arch": fn.arch, "instructions": len(fn.insns),
           "tensor_in_function": sum(1 for x in fn.insns if x.cls == "tensor"),
           "stl": sum(1 for x in fn.insns if base_op(x.op) == "STL"),
           "ldl": sum(1 for x in fn.insns if base_op(x.op) == "LDL"),
           "loops": [{"header": f"0x{L['header']:04x}", "size": L["size"], "tensor": L["tensor"],
                      "latches": [f"0x{a:04x}" for a in L["latches"]]} for L in sorted(loops, key=lambda L: L["header"])]}
    if main is None:
        res["loop"] = None
        return res
    body = set(main["indices"])
    inner = [L for L in loops if L is not main and set(L["indices"]) < body]
    c, ops = count(fn.insns, main["indices"])
    res["loop"] = {
        "header": f"0x{main['header']:04x}",
        "latches": [f"0x{a:04x}" for a in main["latches"]],
        "ranges": segments(fn.insns, main["indices"]),
        "size": main["size"],
        "range_only": bool(main.get("range_only")),
        "inner": [{"header": f"0x{L['header']:04x}", "size": L["size"], "tensor": L["tensor"]} for L in inner],
        # loops around the main one (a persistent-tile loop; they add no tensor op of their own)
        "enclosing": [{"header": f"0x{L['header']:04x}", "size": L["size"], "tensor": L["tensor"]}
                      for L in loops if L is not main and body < set(L["indices"])],
        # tensor loops outside the main one (e.g. a separate loop over masked tiles)
        "other_tensor_loops": [{"header": f"0x{L['header']:04x}", "size": L["size"], "tensor": L["tensor"]}
                               for L in tensor_loops if L is not main and not body < set(L["indices"])
                               and set(L["indices"]) - body],
        "counts": {k: c.get(k, 0) for k, _ in CLASSES},
        "skippable": skippable_regions(fn.insns, main["indices"], fn.labels),
        "full_tile_total": full_tile_total(fn.insns, main["indices"], fn.labels),
        "opcodes": dict(sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))),
        "stl": sum(1 for i in main["indices"] if base_op(fn.insns[i].op) == "STL"),
        "ldl": sum(1 for i in main["indices"] if base_op(fn.insns[i].op) == "LDL"),
    }
    return res


def per_column(values, n, what, conv=lambda x: x):
    if not values:
        return [None] * n
    if len(values) == 1:
        return [conv(values[0])] * n
    if len(values) != n:
        raise SystemExit(f"--{what} given {len(values)} times for {n} columns (give it once or once per column)")
    return [conv(v) for v in values]


def fmt(x):
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.3g}" if abs(x - round(x)) > 1e-9 else str(int(round(x)))
    return str(x)


def markdown(cols, raw=False):
    heads = [c["label"] for c in cols]
    out = ["| class | " + " | ".join(heads) + " |", "|---|" + "---|" * len(cols)]

    def row(name, vals):
        out.append(f"| {name} | " + " | ".join(vals) + " |")

    row("function", [f"`{c['function']}`" + (f" ({c['arch']})" if c.get("arch") else "") for c in cols])
    row("registers", [fmt(c.get("registers")) for c in cols])
    row("spills: STL/LDL in function, LOCAL", [f"{c['stl']}/{c['ldl']}, {fmt(c.get('local'))}" for c in cols])
    row("tile units per warp per iteration", [fmt(c["tile_units"]) for c in cols])
    row("main loop (header; body ranges)",
        [(f"{c['loop']['header']}; {c['loop']['ranges']}" if c["loop"] else "none") for c in cols])
    row("main loop size (instructions)", [fmt(c["loop"]["size"]) if c["loop"] else "-" for c in cols])
    row("nested loops inside (header: size/tensor)",
        [", ".join(f"{L['header']}: {L['size']}/{L['tensor']}" for L in c["loop"]["inner"]) or "none"
         if c["loop"] else "-" for c in cols])
    row("other loops with tensor ops (header: size/tensor)",
        [", ".join([f"{L['header']}: {L['size']}/{L['tensor']}" for L in c["loop"]["other_tensor_loops"]] +
                   [f"enclosing {L['header']}: {L['size']}/{L['tensor']}" for L in c["loop"].get("enclosing", [])])
         or "none" if c["loop"] else "-" for c in cols])
    def regions(c):
        regs = [r for r in c["loop"].get("skippable", []) if r["size"] >= 8]
        if not regs:
            return "none"
        keys = ("tensor", "ldsm", "lds", "ldgsts", "mufu", "conv")
        return "; ".join(f"{r['range']}: {r['size']}" +
                         (" (" + ", ".join(f"{r['counts'][k]} {k}" for k in keys if r["counts"].get(k)) + ")"
                          if any(r["counts"].get(k) for k in keys) else "") for r in regs)

    row("conditional regions in the loop (raw insns; counted below)", [regions(c) if c["loop"] else "-" for c in cols])
    unit = "raw per iteration" if raw else "per 64x64 unit per warp"
    out.append(f"| **counts ({unit})** |" + " |" * len(cols))
    for k, name in CLASSES:
        vals = []
        for c in cols:
            if not c["loop"]:
                vals.append("-")
                continue
            v = c["loop"]["counts"][k]
            vals.append(fmt(v) if raw or not c["tile_units"] else fmt(v / c["tile_units"]))
        row(name, vals)
    def full(c):
        # census JSONs written before this row existed: their total when the loop has no
        # skippable region, else unknown
        L = c["loop"]
        v = L.get("full_tile_total", None if L.get("skippable") else L["counts"]["total"])
        if v is None:
            return "-"
        return fmt(v) if raw or not c["tile_units"] else fmt(v / c["tile_units"])

    row("total a full tile runs (without skippable regions holding no tensor op or copy)",
        [full(c) if c["loop"] else "-" for c in cols])
    ratios = []
    for c in cols:
        if not c["loop"] or not c["loop"]["counts"]["tensor"]:
            ratios.append("-")
            continue
        k = c["loop"]["counts"]
        ratios.append(f"{k['ldsm'] / k['tensor']:.2f} / {k['total'] / k['tensor']:.1f}")
    row("LDSM per tensor op / instructions per tensor op", ratios)
    return "\n".join(out)


def detail(cols, top=40):
    out = []
    for c in cols:
        if not c["loop"]:
            continue
        out.append(f"\n{c['label']}: main loop opcodes (raw per iteration)")
        items = list(c["loop"]["opcodes"].items())
        for op, n in items[:top]:
            out.append(f"  {n:5d}  {op}")
        if len(items) > top:
            out.append(f"  ... {len(items) - top} more opcodes")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__.split("\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="+", help="cuobjdump -sass / nvdisasm text (.xz ok), or a census JSON")
    ap.add_argument("--kernel", default=".", help="regex on the function name (mangled or demangled)")
    ap.add_argument("--tile-units", action="append", type=float, default=[],
                    help="64x64 units per warp per main-loop iteration (once, or once per column)")
    ap.add_argument("--label", action="append", default=[], help="column label (once per column)")
    ap.add_argument("--res", action="append", default=[], help="cuobjdump -res-usage output (once, or per input)")
    ap.add_argument("--arch", action="append", default=[], help="only functions of this arch (fatbin listings)")
    ap.add_argument("--loop", help="header address of the loop to count (hex), instead of the heaviest")
    ap.add_argument("--raw", action="store_true", help="table of raw per-iteration counts (no normalisation)")
    ap.add_argument("--detail", action="store_true", help="also list the loop's opcode histogram")
    ap.add_argument("--json", help="write the census (every column, raw counts) to this file")
    a = ap.parse_intermixed_args(argv)

    loop_addr = int(a.loop, 16) if a.loop else None
    sass_inputs = [p for p in a.inputs if not p.endswith(".json")]
    res_per_input = per_column(a.res, len(sass_inputs), "res") if sass_inputs else []
    arch_filter = set(a.arch)
    kre = re.compile(a.kernel)
    cols, si = [], 0
    for path in a.inputs:
        if path.endswith(".json"):
            with open(path) as f:
                cols.extend(json.load(f)["columns"])
            continue
        text = read_text(path)
        funcs = parse_sass(text)
        regs = parse_nvdisasm_registers(text)
        dem = demangle([f.name for f in funcs])
        res_path = res_per_input[si]
        si += 1
        res = parse_res(read_text(res_path)) if res_path else {}
        picked = [f for f in funcs if (kre.search(f.name) or kre.search(dem[f.name]))
                  and (not arch_filter or f.arch in arch_filter)]
        if not picked:
            names = ", ".join(sorted({f.name for f in funcs}))[:2000]
            print(f"{path}: no function matches /{a.kernel}/ (functions: {names})", file=sys.stderr)
            continue
        for fn in picked:
            c = census_function(fn, loop_addr)
            c["source"] = path
            c["demangled"] = dem[fn.name]
            r = res.get((fn.arch, fn.name)) or res.get((None, fn.name))
            c["registers"] = r.get("REG") if r else regs.get(fn.name)
            c["local"] = r.get("LOCAL") if r else None
            c["stack"] = r.get("STACK") if r else None
            c["shared_static"] = r.get("SHARED") if r else None
            c["label"] = fn.name if len(picked) > 1 or len(sass_inputs) > 1 else os.path.basename(path)
            c["new"] = True
            cols.append(c)
    if not cols:
        return 1
    new = [c for c in cols if c.pop("new", False)]
    for c, u in zip(new, per_column(a.tile_units, len(new), "tile-units")):
        c["tile_units"] = u if u is not None else c.get("tile_units", 1.0)
    for c, lab in zip(cols, per_column(a.label, len(cols), "label")):
        if lab is not None:
            c["label"] = lab
    print(markdown(cols, a.raw))
    if a.detail:
        print(detail(cols))
    spills = [c["label"] for c in cols if c["stl"] or c["ldl"] or (c.get("local") or 0) > 0]
    if spills:
        print(f"\nSPILLS in: {', '.join(spills)}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"columns": cols}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
