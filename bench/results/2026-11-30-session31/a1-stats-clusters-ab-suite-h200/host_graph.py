#!/usr/bin/env python3
"""Issue 39: how much of a synchronised e2e call is the host's (session 30, a2).

Per shape and method (sage2, cuDNN SDPA): the median of N calls timed as the scoreboard's e2e mode
times them (L2 flush, synchronise, events around the call) — once eager, once as the replay of a
CUDA graph captured from the same call (one host call: the GPU's own time plus one graph launch).
eager - graph is the GPU idle time the host's work puts inside the call.
  python3 host_graph.py OUT.jsonl
"""
import contextlib, json, statistics, sys
import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
import sage2

SHAPES = [  # name, B, Hq, Hkv, N, d, causal, dtype
    ("hd128-1k", 4, 32, 32, 1024, 128, False, torch.float16),
    ("hd128c-2k", 4, 32, 32, 2048, 128, True, torch.float16),
    ("hd64-2k", 4, 32, 32, 2048, 64, False, torch.float16),
    ("qwen", 1, 28, 4, 4096, 128, True, torch.bfloat16),
    ("bert", 32, 16, 16, 512, 64, False, torch.float16),
    ("flux", 1, 24, 24, 4608, 128, False, torch.bfloat16),
]
REPS = 30
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")


def times(fn):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(REPS):
        flush.zero_()
        torch.cuda.synchronize()
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) * 1e3)
    return statistics.median(out)


def busy(fn, n=40):
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(n):
        fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1e3 / n


def main():
    out = open(sys.argv[1], "w")
    for name, B, Hq, Hkv, N, d, causal, dt in SHAPES:
        g = torch.Generator(device="cuda").manual_seed(1)
        q = torch.randn(B, Hq, N, d, device="cuda", dtype=dt, generator=g)
        k = torch.randn(B, Hkv, N, d, device="cuda", dtype=dt, generator=g)
        v = torch.randn(B, Hkv, N, d, device="cuda", dtype=dt, generator=g)
        kw = {"enable_gqa": True} if Hq != Hkv else {}
        methods = {
            "sage2": (lambda: sage2.sageattn(q, k, v, tensor_layout="HND", is_causal=causal), None),
            "cudnn": (lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, **kw), SDPBackend.CUDNN_ATTENTION),
        }
        for rnd in range(3):
            for m, (fn, be) in (methods.items() if rnd % 2 == 0 else reversed(methods.items())):
                ctx = sdpa_kernel([be]) if be is not None else contextlib.nullcontext()
                rec = {"shape": name, "method": m, "round": rnd}
                try:
                    with ctx:
                        for _ in range(5):
                            fn()
                        torch.cuda.synchronize()
                        rec["eager_us"] = round(times(fn), 2)
                        rec["busy_us"] = round(busy(fn), 2)
                        s = torch.cuda.Stream()
                        s.wait_stream(torch.cuda.current_stream())
                        with torch.cuda.stream(s):
                            for _ in range(3):
                                fn()
                        torch.cuda.current_stream().wait_stream(s)
                        graph = torch.cuda.CUDAGraph()
                        with torch.cuda.graph(graph):
                            fn()
                        graph.replay()
                        torch.cuda.synchronize()
                        rec["graph_us"] = round(times(graph.replay), 2)
                        del graph
                except Exception as e:  # a backend that refuses: logged, no numbers
                    rec["error"] = repr(e)[:300]
                print(json.dumps(rec), flush=True)
                out.write(json.dumps(rec) + "\n")
                out.flush()
        del q, k, v
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
