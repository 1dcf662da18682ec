#!/usr/bin/env python3
"""SASS statistics of generated kernel sources, to show that a device-code change kept the code.

Developer tool (no GPU needed). The inputs are generated sources as SAGE2_DUMP_DIR writes them
(`<name>.cu`: the host's preamble + `#include "<family>.cuh"`). Each is compiled against a
templates folder (default: this checkout's templates/) with the CUDA toolkit's nvcc/ptxas, with
the options jit::nvrtc_options() gives NVRTC, and the cubin is read back with cuobjdump. Since the
preamble is fixed by the dump, a template-only change can be measured without rebuilding the
library: dump once, `collect` before and after the change, `compare`.

Sources for a covering set: `SAGE2_DUMP_DIR=DIR build/tests/sage2_cpu_tests -tc="jit wgmma*"` (or
"jit attention*" for the mma family); each source is named in the results by its spec key.

Per source it records: ptxas registers / spill bytes / stack, the SASS instruction count of the
entry, an opcode histogram, the loops (backward branches) that hold tensor-core instructions
with their sizes, and two fingerprints: of the opcode sequence and of the whole listing with
addresses removed (equal fingerprint = the same SASS, register names included).

`collect` also reads ready cubins (`<name>.cubin` in SRC_DIR, e.g. NVRTC's own output): their SASS
is counted as is (no compile, so no ptxas facts: registers -1).

Usage:
  scripts/sass_stats.py collect SRC_DIR OUT.json [--templates DIR] [-j N] [--filter SUBSTR]
  scripts/sass_stats.py compare BEFORE.json AFTER.json [--hist]
  scripts/sass_stats.py show STATS.json
Environment: NVCC (default /usr/local/cuda/bin/nvcc, else nvcc on PATH), CUOBJDUMP (cuobjdump).
"""
import argparse
import collections
import concurrent.futures
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TENSOR_OPS = ("HGMMA", "IGMMA", "QGMMA", "HMMA", "IMMA", "QMMA")
INSN = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")


def tool(env, default):
    if os.environ.get(env):
        return os.environ[env]
    if default and os.path.exists(default):
        return default
    return shutil.which(os.path.basename(default or env.lower())) or env.lower()


def arch_of(src):
    m = re.search(r"^#define SAGE2_ARCH (\d+)", src, re.M)
    return "sm_89" if m and m.group(1) == "89" else "sm_90a"


def ptxas_facts(log):
    f = {"registers": -1, "spill_store": 0, "spill_load": 0, "stack": 0}
    for line in log.splitlines():
        m = re.search(r"Used (\d+) registers", line)
        if m:
            f["registers"] = int(m.group(1))
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            f["stack"], f["spill_store"], f["spill_load"] = map(int, m.groups())
    return f


def parse_sass(text):
    """Instructions of the (single) entry function: list of (address, text without operand-free noise)."""
    out = []
    for line in text.splitlines():
        m = INSN.match(line)
        if m:
            out.append((int(m.group(1), 16), m.group(2)))
    return out


def opcode(insn):
    body = re.sub(r"^@!?U?P\w+\s+", "", insn)
    return body.split()[0] if body else ""


def loops(insns):
    """Backward branches whose body holds tensor-core instructions: (start, end, size, tensor ops)."""
    index = {a: i for i, (a, _) in enumerate(insns)}
    res = []
    for i, (a, s) in enumerate(insns):
        op = opcode(s)
        if not op.startswith("BRA"):
            continue
        m = re.search(r"0x([0-9a-f]+)$", s)  # cuobjdump: the target is the last operand
        tgt = int(m.group(1), 16) if m else None
        if tgt is None or tgt > a or tgt not in index:
            continue
        body = insns[index[tgt]:i + 1]
        nt = sum(1 for _, x in body if opcode(x).split(".")[0] in TENSOR_OPS)
        if nt:
            res.append({"start": tgt, "end": a, "size": len(body), "tensor": nt})
    return res


def sass_facts(facts, sass):
    insns = parse_sass(sass)
    ops = collections.Counter(opcode(s) for _, s in insns)
    norm = "\n".join(s for _, s in insns)  # branch targets included: same text = same code
    facts.update({
        "total": len(insns),
        "loops": loops(insns),
        "hist": dict(sorted(ops.items())),
        "op_fp": hashlib.sha1("\n".join(opcode(s) for _, s in insns).encode()).hexdigest()[:12],
        "sass_fp": hashlib.sha1(norm.encode()).hexdigest()[:12],
    })
    return facts


def collect_one(path, templates, nvcc, cuobjdump):
    if path.endswith(".cubin"):
        sass = subprocess.run([cuobjdump, "-sass", path], capture_output=True, text=True, check=True).stdout
        facts = {"registers": -1, "spill_store": 0, "spill_load": 0, "stack": 0, "arch": "?"}
        return os.path.basename(path)[:-6], sass_facts(facts, sass)
    src = open(path, encoding="utf-8").read()
    arch = arch_of(src)
    key = re.search(r"^// key:\s+(\S+)", src, re.M)  # the spec's key (jit/source_builder.cpp)
    name = key.group(1) if key else os.path.basename(path)[:-3]
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "k.cubin")
        # jit::nvrtc_options(): -std=c++17, IEEE div/sqrt, no FTZ, ptxas -v (-default-device is
        # NVRTC-only; the templates mark their device functions).
        cmd = [nvcc, "-x", "cu", f"-arch={arch}", "-cubin", "-std=c++17", "-prec-div=true", "-prec-sqrt=true",
               "-ftz=false", "-Xptxas", "-v", "-I", templates, "-o", cubin, path]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            return name, {"error": (r.stdout + r.stderr)[-4000:]}
        facts = ptxas_facts(r.stdout + r.stderr)
        facts["warnings"] = sorted(set(re.findall(r"\b(C\d{4})\b", r.stdout + r.stderr)))
        sass = subprocess.run([cuobjdump, "-sass", cubin], capture_output=True, text=True, check=True).stdout
    facts["arch"] = arch
    return name, sass_facts(facts, sass)


def cmd_collect(a):
    nvcc = tool("NVCC", "/usr/local/cuda/bin/nvcc")
    cuobjdump = tool("CUOBJDUMP", "cuobjdump")
    files = sorted(os.path.join(a.src, f) for f in os.listdir(a.src)
                   if (f.endswith(".cu") or f.endswith(".cubin")) and a.filter in f)
    res = {}
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
        for name, facts in ex.map(lambda p: collect_one(p, a.templates, nvcc, cuobjdump), files):
            res[name] = facts
            print(f"{name}: " + (f"ERROR" if "error" in facts else
                                 f"regs {facts['registers']} spill {facts['spill_store']}/{facts['spill_load']} "
                                 f"total {facts['total']}"), file=sys.stderr, flush=True)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1, sort_keys=True)
    bad = [n for n, v in res.items() if "error" in v]
    for n in bad:
        print(f"{n}:\n{res[n]['error']}", file=sys.stderr)
    return 1 if bad else 0


def loop_str(v):
    """Size of the innermost loop with tensor-core instructions (the KV loop; the larger regions
    are back edges of out-of-line wait loops)."""
    sizes = [l["size"] for l in v.get("loops", [])]
    return str(min(sizes)) if sizes else "-"


def cmd_show(a):
    res = json.load(open(a.stats))
    for n, v in sorted(res.items()):
        if "error" in v:
            print(f"{n}  ERROR")
            continue
        print(f"{n}  regs {v['registers']} spill {v['spill_store']}/{v['spill_load']} stack {v['stack']} "
              f"total {v['total']} loops {loop_str(v)}")
    return 0


def cmd_compare(a):
    b, c = json.load(open(a.before)), json.load(open(a.after))
    rows, names = [], sorted(set(b) | set(c))
    same = facts_moved = worst = 0
    for n in names:
        x, y = b.get(n), c.get(n)
        if not x or not y or "error" in x or "error" in y:
            rows.append(f"{n}: missing or failed on one side")
            facts_moved += 1
            continue
        ident = x["sass_fp"] == y["sass_fp"]
        same += ident
        d_tot = y["total"] - x["total"]
        worst = max(worst, abs(d_tot))
        flag = "identical" if ident else ("same opcodes" if x["op_fp"] == y["op_fp"] else "differs")
        f_x = (x["registers"], x["spill_store"], x["spill_load"], x["stack"])
        f_y = (y["registers"], y["spill_store"], y["spill_load"], y["stack"])
        facts_moved += f_x != f_y
        regs = f"{x['registers']}" if x["registers"] == y["registers"] else f"{x['registers']}->{y['registers']}"
        spill = f"{x['spill_store']}/{x['spill_load']}"
        if (x["spill_store"], x["spill_load"]) != (y["spill_store"], y["spill_load"]):
            spill += f"->{y['spill_store']}/{y['spill_load']}"
        tot = f"{x['total']}" if not d_tot else f"{x['total']}->{y['total']} ({d_tot:+d})"
        lp = loop_str(x) if loop_str(x) == loop_str(y) else f"{loop_str(x)}->{loop_str(y)}"
        rows.append(f"{n}: regs {regs} spill {spill} total {tot} loop {lp} [{flag}]")
        if a.hist and not ident:
            for o in sorted(set(x["hist"]) | set(y["hist"])):
                dx, dy = x["hist"].get(o, 0), y["hist"].get(o, 0)
                if dx != dy:
                    rows.append(f"    {o}: {dx} -> {dy}")
    print("\n".join(rows))
    print(f"{len(names)} kernels: {same} identical SASS, {facts_moved} with other registers/spills/stack "
          f"(or missing), largest instruction-count change {worst}")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("collect")
    p.add_argument("src")
    p.add_argument("out")
    p.add_argument("--templates", default=os.path.join(ROOT, "templates"))
    p.add_argument("-j", "--jobs", type=int, default=2)
    p.add_argument("--filter", default="")
    p = sub.add_parser("compare")
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--hist", action="store_true")
    p = sub.add_parser("show")
    p.add_argument("stats")
    a = ap.parse_args()
    return {"collect": cmd_collect, "compare": cmd_compare, "show": cmd_show}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
