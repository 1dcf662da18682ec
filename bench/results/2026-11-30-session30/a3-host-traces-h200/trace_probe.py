#!/usr/bin/env python3
"""Issue 39: where the host's share of a synchronised e2e call goes (session 30, a3). One
torch.profiler session (CPU + CUDA activities) per (shape, method) around 4 eager calls timed as
the scoreboard's e2e mode times them (L2 flush, synchronise, events around the call); the chrome
traces are written to OUT/trace_<shape>_<method>.json for reading on the CPU (trace_read.py).
  python3 trace_probe.py OUT
"""
import os, sys
import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
from torch.profiler import profile, ProfilerActivity
import sage2

SHAPES = [("hd128-1k", 4, 32, 32, 1024, 128, False, torch.float16),
          ("hd64-2k", 4, 32, 32, 2048, 64, False, torch.float16),
          ("flux", 1, 24, 24, 4608, 128, False, torch.bfloat16)]
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for name, B, Hq, Hkv, N, d, causal, dt in SHAPES:
    g = torch.Generator(device="cuda").manual_seed(1)
    q, k, v = (torch.randn(B, h, N, d, device="cuda", dtype=dt, generator=g) for h in (Hq, Hkv, Hkv))
    for m in ("sage2", "cudnn"):
        if m == "sage2":
            fn = lambda: sage2.sageattn(q, k, v, tensor_layout="HND", is_causal=causal)
            ctx = None
        else:
            fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            ctx = sdpa_kernel([SDPBackend.CUDNN_ATTENTION])
        if ctx: ctx.__enter__()
        for _ in range(10):
            fn()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(4):
                flush.zero_()
                torch.cuda.synchronize()
                with torch.profiler.record_function("timed_call"):
                    a.record()
                    fn()
                    b.record()
                b.synchronize()
                print(name, m, "e2e us (under the profiler)", round(a.elapsed_time(b) * 1e3, 1), flush=True)
        if ctx: ctx.__exit__(None, None, None)
        prof.export_chrome_trace(os.path.join(out, f"trace_{name}_{m}.json"))
