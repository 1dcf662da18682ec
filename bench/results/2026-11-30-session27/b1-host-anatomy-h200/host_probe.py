"""Session 27: the anatomy of the e2e call's time outside its kernels, per shape and method.
  e2e_sync   CUDA events around one call after an L2 flush and a synchronise (the scoreboard's e2e)
  e2e_busy   the same with the GPU kept busy ~1 ms before the start event (host latency hidden)
  host_busy  perf_counter around the call while the GPU is busy (the host's own cost, no waiting)
  host_idle  perf_counter around the call right after a synchronise (as inside e2e_sync)
For sage2 also the pieces of its eager fast path, each timed while the GPU is busy:
  fast_call  the cached _FastCall alone (what sageattn runs after its key lookup)
  c_call     the C call alone (sage2_attention through ctypes: C++ + driver), same pointers
  empty_out  torch.empty of the output
And floors: events alone, events around one tiny torch kernel."""
import json, os, statistics, sys, time
import torch, sage2
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from sage2 import _attention, _core

out = sys.argv[1]
REPS = int(os.environ.get("REPS", "30"))
SH = {"tiny": (1, 1, 1, 64, 128, False, torch.float16),
      "hd128-1k": (4, 32, 32, 128, 1024, False, torch.float16),
      "hd64c-1k": (4, 32, 32, 64, 1024, True, torch.float16),
      "qwen": (1, 28, 4, 128, 4096, True, torch.bfloat16),
      "bert": (32, 16, 16, 64, 512, False, torch.float16),
      "vit": (64, 12, 12, 64, 197, False, torch.float16),
      "flux": (1, 24, 24, 128, 4608, False, torch.bfloat16)}
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
a, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
SLEEP = 2_000_000


def med(x):
    return round(statistics.median(x), 2)


def timings(fn):
    sync, busy, hb, hi = [], [], [], []
    for _ in range(REPS):
        flush.zero_(); torch.cuda.synchronize()
        a.record(); fn(); e.record(); e.synchronize(); sync.append(a.elapsed_time(e) * 1e3)
        flush.zero_(); torch.cuda.synchronize()
        torch.cuda._sleep(SLEEP)
        a.record(); fn(); e.record(); e.synchronize(); busy.append(a.elapsed_time(e) * 1e3)
        flush.zero_(); torch.cuda.synchronize()
        torch.cuda._sleep(SLEEP)
        t0 = time.perf_counter(); fn(); hb.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize()
        t0 = time.perf_counter(); fn(); hi.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize()
    return {"e2e_sync_us": med(sync), "e2e_busy_us": med(busy), "host_busy_us": med(hb), "host_idle_us": med(hi)}


def host_only(fn):
    hb = []
    for _ in range(REPS):
        torch.cuda.synchronize(); torch.cuda._sleep(SLEEP)
        t0 = time.perf_counter(); fn(); hb.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return med(hb)


res = []
def emit(r):
    print(json.dumps(r), flush=True); res.append(r)

x = torch.zeros(1, device="cuda")
emit({"shape": "-", "method": "events_only", **timings(lambda: None)})
emit({"shape": "-", "method": "one_tiny_kernel", **timings(lambda: x.add_(1))})
ONLY = os.environ.get("SHAPES")
METHODS = os.environ.get("METHODS", "sage2,cudnn").split(",")
for name, (b, h, hk, d, n, causal, dt) in SH.items():
    if ONLY and name not in ONLY.split(","):
        continue
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(b, h, n, d, device="cuda", dtype=dt, generator=g)
    k, v = (torch.randn(b, hk, n, d, device="cuda", dtype=dt, generator=g) for _ in range(2))
    kk, vv = (x_.repeat_interleave(h // hk, dim=1) for x_ in (k, v))
    def s2(): return sage2.sageattn(q, k, v, tensor_layout="HND", is_causal=causal)
    def cu():
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            return F.scaled_dot_product_attention(q, kk, vv, is_causal=causal)
    _attention._fast.clear()
    for mname, fn in (("sage2", s2), ("cudnn", cu)):
        if mname not in METHODS:
            continue
        for _ in range(3): fn()
        torch.cuda.synchronize()
        r = {"shape": name, "method": mname, **timings(fn)}
        if mname == "sage2":
            fcs = list(_attention._fast.values())
            if len(fcs) == 1:
                fc = fcs[0]
                r["fast_call_us"] = host_only(lambda: fc(q, k, v))
                o = fc(q, k, v)
                s = fc.structs()
                s.o.data = o.data_ptr()
                stream = _core._raw_stream(fc.index)
                r["c_call_us"] = host_only(lambda: s.call(stream))
                r["empty_out_us"] = host_only(lambda: torch.empty(fc.shape, dtype=fc.dtype, device=fc.device))
                r["kernels"] = None
            else:
                r["fast_entries"] = len(fcs)
        emit(r)
json.dump(res, open(os.path.join(out, os.environ.get("TAG", "host_probe") + ".json"), "w"), indent=1)
