"""Random calls inside a warm-up's selection, in a fresh process, against a cache filled by a
warm-up bundle: how many kernels they still compile (the library's own counter, sage2.stats())
and how long each call that builds a new plan takes (issue 43; DESIGN.md record `warm_calls`).

    python3 bench/warm_calls.py --cache-dir DIR --bundle NAME --out FILE.jsonl [--calls 240]
        [--head-dims 64,96,128] [--dtypes f16,bf16] [--causal none,top-left] [--seed N]

The cache directory is used read-only by design of the check (a call that compiled would add an
entry; the count comes from the library either way). Every call is new to the process (random
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
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache-dir", required=True)
    ap.add_argument("--bundle", required=True, help="what filled the cache (a name for the record)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--calls", type=int, default=240)
    ap.add_argument("--head-dims", default="64,96,128")
    ap.add_argument("--dtypes", default="f16,bf16")
    ap.add_argument("--causal", default="none,top-left")
    ap.add_argument("--seed", type=int, default=20261128)
    ap.add_argument("--run", default=None)
    a = ap.parse_args()
    os.environ["SAGE2_CACHE_DIR"] = a.cache_dir  # before the library reads its settings
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
    compiles = after["compiled"] - before["compiled"]
    rec = {
        "run": a.run or time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()) + "-warm",
        "commit": sage2.build_commit(),
        "env": {k: v for k, v in os.environ.items() if k.startswith("SAGE2_")},
        "mode": "warm_calls",
        "method": "sage2",
        "bundle": a.bundle,
        "calls": len(times),
        "compiles": compiles,
        "disk_loads": after["disk_loads"] - before["disk_loads"],
        "first_call_ms_max": round(max(times), 2),
        "first_call_ms_median": round(sorted(times)[len(times) // 2], 2),
        "first_call_ms_first": round(times[0], 2),
        "selection": "%s: hd %s, %s, causal %s; B 1-4, Hkv 1-8, GQA 1-4, N 1-16K, HND/NHD" % (
            a.bundle, a.head_dims, a.dtypes, a.causal),
        "device": torch.cuda.get_device_name(0),
        "host": socket.gethostname(),
        "command": "python3 bench/warm_calls.py " + " ".join(sys.argv[1:]),
    }
    with open(a.out, "a") as f:
        f.write(json.dumps(rec) + "\n")
    print(json.dumps(rec))
    return 0 if compiles == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
