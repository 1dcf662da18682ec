#!/usr/bin/env python3
"""Why one end-to-end cell is slow: sage2.sageattn timed like bench/scoreboard_bench.py (CUDA events,
synchronised per call), with and without the L2-flush buffer write before each call, reporting
torch's caching-allocator traffic over the timed calls (device allocations, frees and retries:
a cudaMalloc/cudaFree inside a timed call stalls it).

  python3 bench/e2e_alloc_probe.py [--seq-lens 4096,8192,16384] [--head-dim 128] [--reps 10]
                                   [--before 64:1024,2048,4096,8192,16384,32768]
--before runs those (head dim: lengths) shapes first, a few calls each, as a scoreboard process
does before the cell, so the caching allocator holds what it would hold there.
"""
import os
os.environ.setdefault("SAGE2_TIERED_COMPILE", "0")  # time the optimized kernels, not a tiered first call
import argparse

import torch

import sage2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq-lens", default="4096,8192,16384")
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--flush-mb", type=int, default=256)
    ap.add_argument("--before", default="")
    a = ap.parse_args()
    flush = torch.empty(a.flush_mb << 20, dtype=torch.uint8, device="cuda")
    for part in filter(None, a.before.split(";")):
        d, lens = part.split(":")
        for n in [int(x) for x in lens.split(",")]:
            q, k, v = (torch.randn(a.batch, a.heads, n, int(d), device="cuda", dtype=torch.float16) for _ in range(3))
            for _ in range(4):
                sage2.sageattn(q, k, v)
            del q, k, v
    torch.cuda.synchronize()
    for n in [int(x) for x in a.seq_lens.split(",")]:
        q, k, v = (torch.randn(a.batch, a.heads, n, a.head_dim, device="cuda", dtype=torch.float16) for _ in range(3))
        flops = 4.0 * a.batch * a.heads * n * n * a.head_dim
        for use_flush in (True, False):
            for _ in range(3):
                sage2.sageattn(q, k, v)
            torch.cuda.synchronize()
            s0 = torch.cuda.memory_stats()
            times = []
            for _ in range(a.reps):
                if use_flush:
                    flush.fill_(1)
                    torch.cuda.synchronize()
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                sage2.sageattn(q, k, v)
                e1.record()
                torch.cuda.synchronize()
                times.append(e0.elapsed_time(e1))
            s1 = torch.cuda.memory_stats()
            d = {key: s1.get(key, 0) - s0.get(key, 0) for key in ("num_device_alloc", "num_device_free", "num_alloc_retries")}
            ms = sorted(times)[len(times) // 2]
            print("N %6d flush %-5s median %.3f ms  %.1f TOPS  allocator over %d calls: %s  reserved %.0f MB" %
                  (n, use_flush, ms, flops / ms / 1e9, a.reps, d, torch.cuda.memory_reserved() / 2**20), flush=True)
        del q, k, v


if __name__ == "__main__":
    main()
