"""Random calls inside a warm-up's selection, in a fresh process, against a cache filled by a
warm-up bundle: how many kernels they still compile (the library's own counter, sage2.stats())
and how long each call that builds a new plan takes (issue 43; DESIGN.md record `warm_calls`).

    python3 bench/warm_calls.py --cache-dirs DIR1,DIR2,DIR3 --bundle NAME --out FILE.jsonl [--calls 240]
        [--head-dims 64,96,128] [--dtypes f16,bf16] [--causal none,top-left] [--seed N]

One round per cache directory (each a fresh import of the same bundle, so a call that compiled in
one round cannot help the next), each in a fresh child process with its own seed; the record sums
the calls and compiles of the rounds and takes the slowest first call of all (`rounds`: their
number, `round_*`: per round). Every call is new to the process (random
batch, heads, GQA group, sequence lengths 1..16K, HND or NHD), so each one plans, loads its kernels
from the disk cache or compiles them; first_call_ms_max is the slowest of those calls, CUDA-synced
wall time (torch and the sage2 context are initialised before the first timed call).
"""
import argparse
import json
import math
import os
import random
import socket
import subprocess
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache-dirs", required=True, help="one per round (comma-separated)")
    ap.add_argument("--child", action="store_true", help="one round in this process (internal)")
    ap.add_argument("--bundle", required=True, help="what filled the cache (a name for the record)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--calls", type=int, default=240)
    ap.add_argument("--head-dims", default="64,96,128")
    ap.add_argument("--dtypes", default="f16,bf16")
    ap.add_argument("--causal", default="none,top-left")
    ap.add_argument("--seed", type=int, default=20261128)
    ap.add_argument("--run", default=None)
    a = ap.parse_args()
    if not a.child:
        return parent(a)
    os.environ["SAGE2_CACHE_DIR"] = a.cache_dirs  # before the library reads its settings
    import torch
    import sage2

    hds = [int(x) for x in a.head_dims.split(",")]
    dts = [{"f16": torch.float16, "bf16": torch.bfloat16}[x] for x in a.dtypes.split(",")]
    causal = [{"none": False, "top-left": True}[x] for x in a.causal.split(",")]
    rng = random.Random(a.seed)
    dev = torch.device("cuda", 0)
    torch.ones(1, device=dev).sum().item()  # torch's context, allocator and a kernel of its own
    before = sage2.stats()["process"]

    times = []
    for i in range(a.calls):
        hd, dt, c = rng.choice(hds), rng.choice(dts), rng.choice(causal)
        hkv = rng.randint(1, 8)
        g = rng.choice([1, 1, 2, 4])
        b = rng.randint(1, 4)
        if rng.random() < 0.25:
            nq = rng.randint(1, 16)  # decode-sized: the direct path
        else:
            nq = max(1, int(2 ** rng.uniform(0, 14)))
        nk = nq if rng.random() < 0.6 else max(1, int(2 ** rng.uniform(0, 14)))
        layout = rng.choice(["HND", "NHD"])
        shape_q = (b, hkv * g, nq, hd) if layout == "HND" else (b, nq, hkv * g, hd)
        shape_k = (b, hkv, nk, hd) if layout == "HND" else (b, nk, hkv, hd)
        q = torch.randn(shape_q, dtype=dt, device=dev)
        k = torch.randn(shape_k, dtype=dt, device=dev)
        v = torch.randn(shape_k, dtype=dt, device=dev)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        sage2.sageattn(q, k, v, tensor_layout=layout, is_causal=c)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    after = sage2.stats()["process"]
    print(json.dumps({"calls": len(times), "compiles": after["compiled"] - before["compiled"],
                      "disk_loads": after["disk_loads"] - before["disk_loads"], "max_ms": max(times),
                      "median_ms": sorted(times)[len(times) // 2], "first_ms": times[0],
                      "commit": sage2.build_commit(), "device": torch.cuda.get_device_name(0)}))
    return 0


def parent(a):
    rounds = []
    for i, d in enumerate(a.cache_dirs.split(",")):
        argv = [sys.executable, os.path.abspath(__file__), "--child", "--cache-dirs", d, "--bundle", a.bundle,
                "--out", a.out, "--calls", str(a.calls), "--head-dims", a.head_dims, "--dtypes", a.dtypes,
                "--causal", a.causal, "--seed", str(a.seed + i)]
        p = subprocess.run(argv, capture_output=True, text=True)
        if p.returncode != 0:
            sys.stderr.write(p.stdout[-2000:] + p.stderr[-4000:])
            return 2
        rounds.append(json.loads(p.stdout.strip().splitlines()[-1]))
    rec = {
        "run": a.run or time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()) + "-warm",
        "commit": rounds[0]["commit"],
        "env": {k: v for k, v in os.environ.items() if k.startswith("SAGE2_")},
        "mode": "warm_calls",
        "method": "sage2",
        "bundle": a.bundle,
        "rounds": len(rounds),
        "calls": sum(r["calls"] for r in rounds),
        "compiles": sum(r["compiles"] for r in rounds),
        "disk_loads": sum(r["disk_loads"] for r in rounds),
        "first_call_ms_max": round(max(r["max_ms"] for r in rounds), 2),
        "round_calls": [r["calls"] for r in rounds],
        "round_compiles": [r["compiles"] for r in rounds],
        "round_first_call_ms_max": [round(r["max_ms"], 2) for r in rounds],
        "round_first_call_ms_median": [round(r["median_ms"], 3) for r in rounds],
        "selection": "%s: hd %s, %s, causal %s; B 1-4, Hkv 1-8, GQA 1-4, N 1-16K, HND/NHD" % (
            a.bundle, a.head_dims, a.dtypes, a.causal),
        "device": rounds[0]["device"],
        "host": socket.gethostname(),
        "command": "python3 bench/warm_calls.py " + " ".join(sys.argv[1:]),
    }
    with open(a.out, "a") as f:
        f.write(json.dumps(rec) + "\n")
    print(json.dumps(rec))
    return 0 if rec["compiles"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
