#!/usr/bin/env python3
"""Where the direct path beats the quantized one (issue 39 item 2: the Auto rule from data).

For a grid of dense calls, one sage2.sageattn call's time with small_q_path="direct", "quantized" and
"auto" (CUDA events around a batch of calls, the paths alternated within each round and the
order reversed every other round, the median over rounds; the same seeded inputs for both). The grid
spans the two families of shapes the rule must tell apart at a few hundred query rows per kv head
(R = Nq · Hq / Hkv, the rule's variable, plan/direct_rule.hpp):
  self       encoder self-attention, Nq = Nk = N (ViT, BERT, Whisper-sized): N 128..1024 at
             B·H 64..768, head dims 64 and 128
  decode     GQA 32/8, B 4, Nq 16..128 (R 64..512) over Nk 1K..16K, head dim 128
Records (JSONL, one per cell, not scored): {"run", "commit", "mode": "path_crossover", "kind",
"batch", "heads", "kv_heads", "nq", "nk", "head_dim", "rows", "dtype", "direct_us", "quantized_us",
"auto_us" (small_q_path="auto": the library's rule), "rounds", "device", "command"}.

Usage (GPU machine, from the repository root):
  PYTHONPATH=python SAGE2_LIBRARY=build/libsage2.so python3 bench/path_crossover.py --out F [--rounds 3]
"""
import os
os.environ.setdefault("SAGE2_TIERED_COMPILE", "0")  # time the optimized kernels, not a tiered first call
import argparse
import json
import statistics
import sys
import time

import torch

import sage2

SELF = [(b, h, n, d) for d in (64, 128) for (b, h) in ((64, 12), (32, 16), (4, 16))
        for n in (128, 197, 256, 320, 384, 448, 512, 768, 1024)]
DECODE = [(4, 32, 8, nq, nk, 128) for nq in (16, 32, 64, 96, 128) for nk in (1024, 4096, 8192, 16384)]


def timed(fn, calls):
    fn()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) * 1000.0 / calls


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=10)
    a = ap.parse_args()
    run = time.strftime("%Y-%m-%dT%H:%MZ-crossover", time.gmtime())
    commit = sage2.build_commit()
    cells = [("self", b, h, h, n, n, d) for (b, h, n, d) in SELF] + [("decode", b, hq, hkv, nq, nk, d) for (b, hq, hkv, nq, nk, d) in DECODE]
    dev = torch.cuda.get_device_name()
    with open(a.out, "a") as fh:
        for kind, b, hq, hkv, nq, nk, d in cells:
            g = torch.Generator(device="cuda").manual_seed(1)
            q = torch.randn(b, hq, nq, d, generator=g, device="cuda").half()
            k = torch.randn(b, hkv, nk, d, generator=g, device="cuda").half()
            v = torch.randn(b, hkv, nk, d, generator=g, device="cuda").half()
            fns = {p: (lambda p=p: sage2.sageattn(q, k, v, tensor_layout="HND", small_q_path=p)) for p in ("direct", "quantized", "auto")}
            t = {p: [] for p in fns}
            order = list(fns)
            for r in range(a.rounds):
                for p in (order if r % 2 == 0 else order[::-1]):
                    t[p].append(timed(fns[p], a.calls))
            rows = nq * hq // hkv
            rec = {"run": run, "commit": commit, "mode": "path_crossover", "kind": kind, "batch": b, "heads": hq,
                   "kv_heads": hkv, "nq": nq, "nk": nk, "head_dim": d, "rows": rows, "dtype": "fp16",
                   "direct_us": statistics.median(t["direct"]), "quantized_us": statistics.median(t["quantized"]),
                   "auto_us": statistics.median(t["auto"]),
                   "rounds": a.rounds, "device": dev, "command": " ".join(["python3"] + sys.argv)}
            fh.write(json.dumps(rec) + "\n")
            fh.flush()
            best = min(rec["direct_us"], rec["quantized_us"])
            print("%-6s B%-3d H%-3d/%-3d Nq %5d Nk %6d hd %3d R %5d  direct %8.1f  quantized %8.1f  d/q %5.2f  auto %8.1f (%.2f of the faster)" %
                  (kind, b, hq, hkv, nq, nk, d, rows, rec["direct_us"], rec["quantized_us"], rec["direct_us"] / rec["quantized_us"],
                   rec["auto_us"], rec["auto_us"] / best), flush=True)
            del q, k, v


if __name__ == "__main__":
    main()
