"""Kernel spans of one sage2.sageattn call replayed from a CUDA graph (no host launch gaps):
python3 graph_profile.py SHAPE [SHAPE...]; prints per replay the kernels' start/span/exposed."""
import os, sys, json
os.environ.setdefault("SAGE2_TIERED_COMPILE", "0")
sys.path.insert(0, os.path.join(os.getcwd(), "bench"))
from stage_profile import SHAPES
import torch, sage2
from torch.profiler import profile, ProfilerActivity
for name in sys.argv[1:]:
    b, h, hkv, d, n, causal, dt = SHAPES[name]
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[dt]
    g = torch.Generator(device="cuda").manual_seed(7)
    q = torch.randn((b, h, n, d), dtype=dtype, device="cuda", generator=g)
    k = torch.randn((b, hkv, n, d), dtype=dtype, device="cuda", generator=g)
    v = torch.randn((b, hkv, n, d), dtype=dtype, device="cuda", generator=g)
    f = lambda: sage2.sageattn(q, k, v, tensor_layout="HND", is_causal=causal)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3): f()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    gr = torch.cuda.CUDAGraph()
    with torch.cuda.graph(gr):
        f()
    for _ in range(3): gr.replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            gr.replay(); torch.cuda.synchronize()
    spans = sorted((float(e.time_range.start), float(e.time_range.end), e.name) for e in prof.events()
                   if str(getattr(getattr(e, "device_type", None), "name", "")).upper() == "CUDA" and "sage2" in e.name)
    calls, cur, last = [], [], None
    for sp in spans:
        if last is not None and sp[0] - last > 50: calls.append(cur); cur = []
        cur.append(sp); last = max(last or sp[1], sp[1])
    calls.append(cur)
    for c in calls:
        t0, fr, row = c[0][0], float("-inf"), []
        for st, en, nm in c:
            ex = max(0.0, en - max(st, fr)); fr = max(fr, en)
            row.append("%s %.1f+%.1f(%.1f)" % (nm.replace("sage2_", "")[:12], st - t0, en - st, ex))
        print(name, " | ".join(row), flush=True)
