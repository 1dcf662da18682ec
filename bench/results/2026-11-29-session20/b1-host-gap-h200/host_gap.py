"""Where the e2e call's time outside its kernels goes (session 20): per shape and method,
  e2e_sync  CUDA events around one call after a synchronise (the scoreboard's e2e),
  e2e_busy  the same with the GPU kept busy by torch.cuda._sleep before it (host latency hidden),
  host      perf_counter around the call alone (the host's own time to return),
and a torch.profiler trace (CPU + CUDA) of three synchronised calls: trace_<shape>_<method>.json."""
import json, os, statistics, sys, time
import torch, sage2
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

out = sys.argv[1]
SH = {"hd128-1k": (4, 32, 32, 128, 1024, False, torch.float16),
      "hd64c-1k": (4, 32, 32, 64, 1024, True, torch.float16),
      "flux": (1, 24, 24, 128, 4608, False, torch.bfloat16),
      "qwen": (1, 28, 4, 128, 4096, True, torch.bfloat16),
      "bert": (32, 16, 16, 64, 512, False, torch.float16)}
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
res = []
for name, (b, h, hk, d, n, causal, dt) in SH.items():
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(b, h, n, d, device="cuda", dtype=dt, generator=g)
    k, v = (torch.randn(b, hk, n, d, device="cuda", dtype=dt, generator=g) for _ in range(2))
    kk, vv = (x.repeat_interleave(h // hk, dim=1) for x in (k, v))
    def s2(): return sage2.sageattn(q, k, v, tensor_layout="HND", is_causal=causal)
    def cu():
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            return F.scaled_dot_product_attention(q, kk, vv, is_causal=causal)
    for mname, fn in (("sage2", s2), ("cudnn", cu)):
        for _ in range(3): fn()
        torch.cuda.synchronize()
        a, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        sync, busy, host = [], [], []
        for _ in range(20):
            flush.zero_(); torch.cuda.synchronize()
            a.record(); fn(); e.record(); e.synchronize(); sync.append(a.elapsed_time(e) * 1e3)
            flush.zero_(); torch.cuda.synchronize()
            torch.cuda._sleep(2_000_000)  # ~1 ms of GPU work ahead of the call
            a.record(); fn(); e.record(); e.synchronize(); busy.append(a.elapsed_time(e) * 1e3)
            flush.zero_(); torch.cuda.synchronize()
            t0 = time.perf_counter(); fn(); host.append((time.perf_counter() - t0) * 1e6); torch.cuda.synchronize()
        r = {"shape": name, "method": mname, "e2e_sync_us": statistics.median(sync),
             "e2e_busy_us": statistics.median(busy), "host_us": statistics.median(host)}
        print(json.dumps(r), flush=True); res.append(r)
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                flush.zero_(); torch.cuda.synchronize()
                a.record(); fn(); e.record(); e.synchronize()
        prof.export_chrome_trace(os.path.join(out, f"trace_{name}_{mname}.json"))
json.dump(res, open(os.path.join(out, "host_gap.json"), "w"), indent=1)
