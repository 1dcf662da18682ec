"""Where a call's host time goes on the GPU machine (session 35 c5, discovery): per shape, sage2 and
cuDNN (torch SDPA), µs per call, medians of 5 rounds:
  busy_host   host time per call with the GPU kept busy (a spin kernel enqueued first), so no
              launch waits: sage2.sageattn whole; its C call alone (the cached _FastCall's ctypes
              call on the same pointers); torch.empty of the output alone; cuDNN's whole call
  e2e_idle    CUDA events around one call on an idle GPU (the scoreboard's e2e form, no L2 flush)
  graph       the replay of a CUDA graph of one call (GPU time with no host in between)
e2e_idle - graph = the host time the call exposes."""
import os
os.environ.setdefault("SAGE2_TIERED_COMPILE", "0")
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import sage2
from sage2 import _attention as A

SHAPES = {"b4h32-hd64-1k": (4, 32, 64, 1024, torch.float16), "b4h32-hd128-1k": (4, 32, 128, 1024, torch.float16),
          "dit-xl-512": (8, 16, 72, 1024, torch.float16), "bert-large-512": (32, 16, 64, 512, torch.float16),
          "sdxl-1024": (2, 10, 64, 4096, torch.float16), "vit-b16-197": (64, 12, 64, 197, torch.float16)}
N = 40


def busy(fn, n=N):
    torch.cuda._sleep(200_000_000)  # ~100 ms of GPU work ahead of the calls
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t = (time.perf_counter() - t0) / n * 1e6
    torch.cuda.synchronize()
    return t


def e2e_idle(fn, n=20):
    ts = []
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(n):
        torch.cuda.synchronize()
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) * 1000)
    return statistics.median(ts)


def graph(fn, n=20):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn(); fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    ts = []
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(n):
        torch.cuda.synchronize()
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1000)
    return statistics.median(ts)


def main():
    print("commit", sage2.build_commit(), torch.cuda.get_device_name())
    print("%-16s %-7s %9s %9s %9s %9s %9s %9s" % ("shape", "method", "busy", "c_call", "empty", "e2e_idle", "graph", "exposed"))
    for name, (b, h, d, n, dt) in SHAPES.items():
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=dt, generator=g) for _ in range(3))
        sg = lambda: sage2.sageattn(q, k, v, tensor_layout="HND")
        for _ in range(3):
            sg()
        torch.cuda.synchronize()
        fc = [f for f in A._fast.values() if f.shape == q.shape][-1]
        st = fc.structs()
        stream = torch.cuda.current_stream().cuda_stream
        out = sg()
        st.o.data = out.data_ptr()
        ccall = lambda: st.call(stream)
        emp = lambda: torch.empty(q.shape, dtype=dt, device="cuda")
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            cd = lambda: F.scaled_dot_product_attention(q, k, v)
            for _ in range(3):
                cd()
            rows = {"sage2": [[], [], [], [], []], "cudnn": [[], [], [], [], []]}
            for r in range(5):
                rows["sage2"][0].append(busy(sg)); rows["sage2"][1].append(busy(ccall)); rows["sage2"][2].append(busy(emp))
                rows["sage2"][3].append(e2e_idle(sg)); rows["sage2"][4].append(graph(sg))
                rows["cudnn"][0].append(busy(cd)); rows["cudnn"][3].append(e2e_idle(cd)); rows["cudnn"][4].append(graph(cd))
        for m, v5 in rows.items():
            med = [statistics.median(x) if x else float("nan") for x in v5]
            print("%-16s %-7s %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f" % (name, m, med[0], med[1], med[2], med[3], med[4], med[3] - med[4]))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
