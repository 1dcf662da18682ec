"""Does the tuning database ever make a call slower? (issue 43). For every specialisation whose
database entries change the tile somewhere (entry tile != heuristic tile), times sage2.sageattn
with the database (SAGE2_CACHE_DIR=the tuned cache) and without it (SAGE2_DISABLE_TUNING=1), at
the tuned lengths, a length of the same bucket below them, half of them and twice them, in one child process per setting and round (settings
alternated, the same seeded inputs), and prints a table; a database that changes no tile is
reported as such (then no call can differ).

    python3 bench/tuned_vs_heuristic.py --cache-dir DIR [--rounds 3] [--out FILE.jsonl]

Each cell says whether the database gives it another tile than the heuristic ("differs"), by the
lookup rule of plan/tuning_db.hpp (nearest measured bucket of the specialisation within 3 steps,
ties to the larger; none outside the measured range): where it does not, both settings run the
same kernels and the ratio is the run-to-run spread, which "worst" leaves out.
"""
import argparse
import glob
import json
import os
import subprocess
import sys

CHILD = r"""
import json, os, sys, torch, sage2
cells = json.loads(sys.argv[1])
out = []
for c in cells:
    g = torch.Generator(device="cuda").manual_seed(1234)
    dt = {"f16": torch.float16, "bf16": torch.bfloat16}[c["dtype"]]
    q, k, v = (torch.randn((c["batch"], c["heads"], c["n"], c["head_dim"]), dtype=dt, device="cuda", generator=g)
               for _ in range(3))
    f = lambda: sage2.sageattn(q, k, v, tensor_layout="HND", is_causal=c["causal"])
    for _ in range(3): f()
    torch.cuda.synchronize()
    ts = []
    for _ in range(20):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); f(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b))
    ts.sort()
    out.append(ts[len(ts) // 2])
print(json.dumps(out))
"""


def bucket(n):
    b = 64
    while b < n and b < (1 << 17):
        b *= 2
    return b


def db_tile(entries, e0, n):
    """The tile the database gives a square problem of length n, batch-free, GQA 1, in the
    specialisation of entry e0 (plan/tuning_db.cpp TuningDb::find), or None (the heuristic)."""
    same = [e for e in entries if all(e[k] == e0[k] for k in ("family", "head_dim", "causal", "qk_bits", "smooth_q",
                                                               "smooth_k", "smooth_v", "dtype", "pv_fp16", "pv_acc16"))]
    q = bucket(n)
    lo = {k: min(e[k] for e in same) for k in ("q_bucket", "kv_bucket", "gqa_bucket")}
    hi = {k: max(e[k] for e in same) for k in ("q_bucket", "kv_bucket", "gqa_bucket")}
    key = {"q_bucket": q, "kv_bucket": q, "gqa_bucket": e0["gqa_bucket"]}
    if any(key[k] < lo[k] or key[k] > hi[k] for k in key):
        return None
    log2 = lambda x: x.bit_length() - 1
    dist = lambda e: sum(abs(log2(e[k]) - log2(key[k])) for k in key)
    best = min((e for e in same if dist(e) <= 3), key=lambda e: (dist(e), -e["q_bucket"], -e["kv_bucket"],
                                                                  -e["gqa_bucket"]), default=None)
    return None if best is None or best["tile"] == best["heuristic"]["tile"] else best["tile"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache-dir", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    dbs = glob.glob(os.path.join(a.cache_dir, "tuning-*.json"))
    if not dbs:
        print("no tuning database in %s" % a.cache_dir)
        return 1
    db = json.load(open(dbs[0]))
    changed = [e for e in db["entries"] if e["tile"] != e["heuristic"]["tile"]]
    print("database %s: %d entries, %d change the tile" % (dbs[0], len(db["entries"]), len(changed)))
    if not changed:
        print("every entry keeps the heuristic tile: no call's kernels differ with or without the database")
        return 0
    cells = []
    seen = set()
    for e in changed:
        n0 = e["problem"]["q_len"]
        for n in sorted({n0 // 2, n0 * 3 // 4, n0, n0 * 2}):
            key = (e["head_dim"], e["causal"], e["dtype"], n)
            if n < 64 or key in seen:
                continue
            seen.add(key)
            cells.append({"head_dim": e["head_dim"], "causal": bool(e["causal"]), "dtype": e["dtype"], "n": n,
                          "differs": db_tile(db["entries"], e, n) is not None,
                          "batch": max(1, min(4, 16384 // n)), "heads": e["problem"]["q_heads"],
                          "tuned_tile": e["tile"], "heuristic_tile": e["heuristic"]["tile"]})
    times = {"tuned": [], "heuristic": []}
    for r in range(a.rounds):
        for setting in (("tuned", "heuristic") if r % 2 == 0 else ("heuristic", "tuned")):
            env = dict(os.environ, SAGE2_CACHE_DIR=a.cache_dir)
            if setting == "heuristic":
                env["SAGE2_DISABLE_TUNING"] = "1"
            p = subprocess.run([sys.executable, "-c", CHILD, json.dumps(cells)], env=env, capture_output=True, text=True)
            if p.returncode != 0:
                print(p.stderr[-2000:])
                return 1
            times[setting].append(json.loads(p.stdout.strip().splitlines()[-1]))
    med = lambda xs: sorted(xs)[len(xs) // 2]
    worst = 0.0
    print("%-6s %-7s %-5s %6s  %10s %10s  %6s  %s" % ("hd", "causal", "dtype", "N", "tuned ms", "heur. ms", "ratio",
                                                    "tiles"))
    for i, c in enumerate(cells):
        t = med([x[i] for x in times["tuned"]])
        h = med([x[i] for x in times["heuristic"]])
        if c["differs"]:
            worst = max(worst, t / h)
        c.update({"tuned_ms": t, "heuristic_ms": h, "ratio": t / h, "rounds": a.rounds})
        print("%-6d %-7s %-5s %6d  %10.4f %10.4f  %6.3f  %s" % (c["head_dim"], c["causal"], c["dtype"], c["n"], t, h,
                                                              t / h, "differ" if c["differs"] else "same (spread)"))
        if a.out:
            with open(a.out, "a") as f:
                f.write(json.dumps(dict(c, mode="tuned_vs_heuristic")) + "\n")
    print("worst tuned / heuristic where the tiles differ: %.3f" % worst)
    return 0


if __name__ == "__main__":
    sys.exit(main())
