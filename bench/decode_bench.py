#!/usr/bin/env python3
"""Decode / small-Nq attention: sage2.sageattn against torch SDPA (cuDNN, FlashAttention-2).

One call's time (CUDA events around the call, L2 flushed before it) for each cell, methods
alternated within each round (order reversed every other round), the median over rounds. Cells:
GQA 32/8, B 4, the scoreboard's decode cells (Nq, Nk) = (1, 4K), (1, 32K), (16, 4K), (128, 8K) and
Nq = 1 at Nk 1K / 8K / 128K, head dims 64 and 128. Methods:
  sage2            sage2.sageattn(q, k, v) as a user calls it (small_q_path="auto")
  cudnn, fa2       F.scaled_dot_product_attention(q, k, v, enable_gqa=True) under sdpa_kernel(...)
  sage2_direct     --paths: small_q_path="direct"  (to set the Auto rule's bound from data)
  sage2_quantized  --paths: small_q_path="quantized"
Records (JSONL, one per method and cell; scored by ../shared/tools/scoreboard.py --group decode,
which reads the cells of one run at hd 128: the records of another head dim get the run id
"<run>-hd<d>" so that the scoreboard never mixes head dims):
  {"run", "commit", "method", "mode": "decode_us", "nq", "nk", "hq", "hkv", "head_dim", "batch",
   "dtype", "us", "rounds", "flush_l2_mb", "gbps" (K+V bytes / time), "device", "command", ...}

Usage (GPU machine, from the repository root):
  PYTHONPATH=python SAGE2_LIBRARY=build/libsage2.so python3 bench/decode_bench.py --out decode.jsonl [--paths]
"""
import argparse
import json
import os
os.environ.setdefault("SAGE2_TIERED_COMPILE", "0")  # time the optimized kernels, not a tiered first call
import statistics
import sys
import time
import uuid

import torch
import torch.nn.functional as F

import sage2

CELLS = [(1, 4096), (1, 32768), (16, 4096), (128, 8192), (1, 1024), (1, 8192), (1, 131072)]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def inputs(b, hq, hkv, nq, nk, d, dtype, seed):
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    q = torch.randn(b, hq, nq, d, generator=g, device="cuda", dtype=torch.float32).to(dtype)
    k = torch.randn(b, hkv, nk, d, generator=g, device="cuda", dtype=torch.float32).to(dtype)
    v = torch.randn(b, hkv, nk, d, generator=g, device="cuda", dtype=torch.float32).to(dtype)
    return q, k, v


def sdpa_fn(backend):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    be = {"cudnn": SDPBackend.CUDNN_ATTENTION, "fa2": SDPBackend.FLASH_ATTENTION}[backend]

    def call(q, k, v):
        with sdpa_kernel(be):
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

    return call


def method_fns(paths):
    fns = {
        "sage2": lambda q, k, v: sage2.sageattn(q, k, v),
        "cudnn": sdpa_fn("cudnn"),
        "fa2": sdpa_fn("fa2"),
    }
    if paths:
        fns["sage2_direct"] = lambda q, k, v: sage2.sageattn(q, k, v, small_q_path="direct")
        fns["sage2_quantized"] = lambda q, k, v: sage2.sageattn(q, k, v, small_q_path="quantized")
    return fns


class Timer:
    def __init__(self, flush_mb):
        self.flush = torch.empty(flush_mb << 20, dtype=torch.uint8, device="cuda") if flush_mb else None
        self.e0 = torch.cuda.Event(enable_timing=True)
        self.e1 = torch.cuda.Event(enable_timing=True)

    def us(self, fn, q, k, v):
        if self.flush is not None:
            self.flush.zero_()  # evicts K/V from the L2 (50 MB on the H100)
        self.e0.record()
        fn(q, k, v)
        self.e1.record()
        self.e1.synchronize()
        return self.e0.elapsed_time(self.e1) * 1e3


def commit():
    c = getattr(sage2, "build_commit", None)
    if callable(c):
        c = c()
    return c


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSONL file to append to")
    ap.add_argument("--head-dims", default="128,64")
    ap.add_argument("--cells", default=",".join("%dx%d" % c for c in CELLS), help="NqxNk,... (default: all)")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--dtype", default="float16", choices=["float16", "bfloat16"])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--flush-mb", type=int, default=256, help="L2 flush buffer (0: no flush)")
    ap.add_argument("--paths", action="store_true", help="also time small_q_path='direct' and 'quantized'")
    ap.add_argument("--methods", default=None, help="comma list (default: sage2,cudnn,fa2 [+ paths])")
    ap.add_argument("--run", default=None, help="run id (default: a new one)")
    a = ap.parse_args()

    dtype = getattr(torch, a.dtype)
    fns = method_fns(a.paths)
    if a.methods:
        fns = {m: fns[m] for m in a.methods.split(",")}
    cells = [tuple(int(x) for x in c.split("x")) for c in a.cells.split(",")]
    run = a.run or time.strftime("%Y%m%d-%H%M%S-decode-") + uuid.uuid4().hex[:6]
    env = {k: v for k, v in os.environ.items() if k.startswith("SAGE2_")}
    base = dict(run=run, commit=commit(), env=env, mode="decode_us", batch=a.batch, hq=a.heads, hkv=a.kv_heads,
                dtype=a.dtype, rounds=a.rounds, flush_l2_mb=a.flush_mb, device=torch.cuda.get_device_name(),
                torch=torch.__version__, sage2=sage2.__version__, command=" ".join(sys.argv))
    timer = Timer(a.flush_mb)
    with open(a.out, "a") as out:
        for d in (int(x) for x in a.head_dims.split(",")):
            for nq, nk in cells:
                q, k, v = inputs(a.batch, a.heads, a.kv_heads, nq, nk, d, dtype, seed=nq * 1000003 + nk + d)
                live = {}
                for m, fn in fns.items():  # warm-up: compiles sage2's kernels, picks cuDNN plans
                    try:
                        fn(q, k, v)
                        torch.cuda.synchronize()
                        live[m] = fn
                    except Exception as e:  # a backend that does not take this shape: logged, skipped
                        log("%-15s Nq=%d Nk=%d d=%d: not run (%s: %s)" % (m, nq, nk, d, type(e).__name__,
                                                                         str(e).splitlines()[0][:160]))
                times = {m: [] for m in live}
                order = list(live)
                for r in range(a.rounds):
                    for m in (order if r % 2 == 0 else order[::-1]):
                        times[m].append(timer.us(live[m], q, k, v))
                kv_bytes = 2.0 * a.batch * a.kv_heads * nk * d * q.element_size()
                line = []
                for m in order:
                    us = statistics.median(times[m])
                    rec = dict(base, run=run if d == 128 else "%s-hd%d" % (run, d), method=m, nq=nq, nk=nk,
                               head_dim=d, us=round(us, 2),
                               us_min=round(min(times[m]), 2), gbps=round(kv_bytes / (us * 1e-6) / 1e9, 1))
                    out.write(json.dumps(rec) + "\n")
                    line.append("%s %.1f" % (m, us))
                out.flush()
                log("decode d=%-3d Nq=%-4d Nk=%-6d (GQA %d/%d, B %d): %s us" % (d, nq, nk, a.heads, a.kv_heads,
                                                                            a.batch, " | ".join(line)))
                del q, k, v
                torch.cuda.empty_cache()
    log("run %s written to %s" % (run, a.out))


if __name__ == "__main__":
    main()
