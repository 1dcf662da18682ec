#!/usr/bin/env python3
"""Per-kernel GPU times of a dense sage2.sageattn call and the same tokens through
sage2.sageattn_varlen (torch.profiler), to see which stage a varlen gap comes from.

    PYTHONPATH=python SAGE2_LIBRARY=build/libsage2.so python3 bench/varlen_profile.py [--n 4096] [--b 4] [--causal 1]
"""
import os
os.environ.setdefault("SAGE2_TIERED_COMPILE", "0")  # time the optimized kernels, not a tiered first call
import argparse

import torch
from torch.profiler import ProfilerActivity, profile

import sage2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--b", type=int, default=4)
    ap.add_argument("--h", type=int, default=32)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--causal", type=int, default=1)
    ap.add_argument("--reps", type=int, default=10)
    a = ap.parse_args()
    torch.manual_seed(0)
    q, k, v = (torch.randn(a.b, a.n, a.h, a.d, device="cuda", dtype=torch.float16) for _ in range(3))
    cu = torch.arange(0, (a.b + 1) * a.n, a.n, device="cuda", dtype=torch.int32)
    qp, kp, vp = (t.reshape(a.b * a.n, a.h, a.d) for t in (q, k, v))
    qh, kh, vh = (t.transpose(1, 2).contiguous() for t in (q, k, v))
    calls = {
        "dense NHD": lambda: sage2.sageattn(q, k, v, tensor_layout="NHD", is_causal=bool(a.causal)),
        "dense HND": lambda: sage2.sageattn(qh, kh, vh, tensor_layout="HND", is_causal=bool(a.causal)),
        "varlen": lambda: sage2.sageattn_varlen(qp, kp, vp, cu, cu, a.n, a.n, is_causal=bool(a.causal)),
    }
    for name, fn in calls.items():
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        import time
        ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e2e, host = [], []
        for _ in range(a.reps):
            ev0.record()
            t0 = time.perf_counter()
            fn()
            host.append((time.perf_counter() - t0) * 1e6)
            ev1.record()
            ev1.synchronize()
            e2e.append(ev0.elapsed_time(ev1) * 1e3)
        e2e.sort()
        host.sort()
        print("%s: e2e median %.1f us (min %.1f, max %.1f), host median %.1f us"
              % (name, e2e[len(e2e) // 2], e2e[0], e2e[-1], host[len(host) // 2]))
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(a.reps):
                fn()
            torch.cuda.synchronize()
        per = {}
        for e in prof.key_averages():
            if e.device_type.name == "CUDA" or getattr(e, "self_device_time_total", 0) > 0:
                t = getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0)
                if t > 0:
                    per[e.key] = (t / a.reps, e.count // a.reps)
        total = sum(t for t, _ in per.values())
        print("%s N=%d B=%d causal=%d: GPU %.1f us per call" % (name, a.n, a.b, a.causal, total))
        for key, (t, c) in sorted(per.items(), key=lambda kv: -kv[1][0]):
            print("   %8.1f us  x%d  %s" % (t, c, key[:90]))


if __name__ == "__main__":
    main()
