"""Session 27: encoder shapes on the direct and the quantized path against cuDNN (issue 39 item 2,
the Auto rule). Per shape and method: e2e with a synchronise before each call (the scoreboard's
form) and with the GPU kept busy (host latency hidden), medians of REPS calls, 3 rounds alternated."""
import json, os, statistics, sys
import torch, sage2
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

out = sys.argv[1]
SH = [("vit-b16-b64", 64, 12, 197, 64), ("vit-b16-b32", 32, 12, 197, 64), ("vit-b16-b16", 16, 12, 197, 64),
      ("vit-b16-b128", 128, 12, 197, 64), ("clip-l14-b32", 32, 16, 257, 64), ("vit-h14-b32", 32, 16, 257, 80),
      ("bert-b32", 32, 16, 512, 64), ("bert-b8", 8, 16, 512, 64), ("n384-b32", 32, 12, 384, 64),
      ("n1024-b4-hd64", 4, 32, 1024, 64), ("dit-b8", 8, 16, 1024, 72)]
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
a, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
REPS = 15

def timings(fn):
    sync, busy = [], []
    for _ in range(REPS):
        flush.zero_(); torch.cuda.synchronize()
        a.record(); fn(); e.record(); e.synchronize(); sync.append(a.elapsed_time(e) * 1e3)
        flush.zero_(); torch.cuda.synchronize(); torch.cuda._sleep(2_000_000)
        a.record(); fn(); e.record(); e.synchronize(); busy.append(a.elapsed_time(e) * 1e3)
    return statistics.median(sync), statistics.median(busy)

res = {}
for rnd in range(3):
    for name, b, h, n, d in SH:
        g = torch.Generator(device="cuda").manual_seed(1)
        q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.float16, generator=g) for _ in range(3))
        ms = {"auto": lambda: sage2.sageattn(q, k, v),
              "quantized": lambda: sage2.sageattn(q, k, v, small_q_path="quantized"),
              "direct": lambda: sage2.sageattn(q, k, v, small_q_path="direct"),
              "cudnn": lambda: F.scaled_dot_product_attention(q, k, v)}
        for m, fn in ms.items():
            try:
                if m == "cudnn":
                    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                        for _ in range(3): fn()
                        s, bu = timings(fn)
                else:
                    for _ in range(3): fn()
                    s, bu = timings(fn)
            except Exception as ex:  # a path that refuses the shape
                print(name, m, "error", ex, flush=True); continue
            res.setdefault((name, m), []).append((s, bu))
            print(json.dumps({"round": rnd, "shape": name, "method": m, "sync_us": round(s, 1), "busy_us": round(bu, 1)}), flush=True)
rows = []
for (name, m), v in res.items():
    rows.append({"shape": name, "method": m, "sync_us": round(statistics.median(x[0] for x in v), 1),
                 "busy_us": round(statistics.median(x[1] for x in v), 1), "rounds": len(v)})
json.dump(rows, open(os.path.join(out, "path_probe.json"), "w"), indent=1)
for r in rows: print(r)
