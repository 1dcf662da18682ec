"""Session 27: where the eager fast path's host time goes, step by step (each step timed with
perf_counter while the GPU is busy, and right after a synchronise), for shapes whose workspace
is above and below the per-thread keep limit (_core._WS_KEEP_MAX)."""
import json, os, statistics, sys, time
import torch, sage2
from sage2 import _attention, _core

out = sys.argv[1]
REPS = 40
SH = {"tiny": (1, 1, 1, 64, 128, False, torch.float16),
      "hd64c-1k": (4, 32, 32, 64, 1024, True, torch.float16),
      "hd128-1k": (4, 32, 32, 128, 1024, False, torch.float16),
      "bert": (32, 16, 16, 64, 512, False, torch.float16),
      "qwen": (1, 28, 4, 128, 4096, True, torch.bfloat16)}
STEPS = ["empty_out", "structs", "stream", "capturing", "ws_alloc", "c_call", "del_ws"]
res = []
for name, (b, h, hk, d, n, causal, dt) in SH.items():
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(b, h, n, d, device="cuda", dtype=dt, generator=g)
    k, v = (torch.randn(b, hk, n, d, device="cuda", dtype=dt, generator=g) for _ in range(2))
    _attention._fast.clear()
    for _ in range(3): sage2.sageattn(q, k, v, is_causal=causal)
    fc = list(_attention._fast.values())[0]
    for mode in ("busy", "idle", "busy_keepws"):
        keep = None
        if mode == "busy_keepws":
            keep = torch.empty((fc.ws_bytes + 256,), dtype=torch.uint8, device="cuda")
        acc = {s: [] for s in STEPS}
        tot = []
        for _ in range(REPS):
            torch.cuda.synchronize()
            if mode != "idle": torch.cuda._sleep(2_000_000)
            t = [time.perf_counter()]
            o = torch.empty(fc.shape, dtype=fc.dtype, device=fc.device); t.append(time.perf_counter())
            s = fc.structs(); s.q.data = q.data_ptr(); s.k.data = k.data_ptr(); s.v.data = v.data_ptr(); s.o.data = o.data_ptr(); t.append(time.perf_counter())
            stream = _core._raw_stream(fc.index); t.append(time.perf_counter())
            cap = _core._capturing(); t.append(time.perf_counter())
            ws = keep if keep is not None else torch.empty((fc.ws_bytes + 256,), dtype=torch.uint8, device="cuda"); t.append(time.perf_counter())
            p = s.p; p.workspace = (ws.data_ptr() + 255) // 256 * 256; p.workspace_bytes = fc.ws_bytes
            st = s.call(stream); t.append(time.perf_counter())
            del ws; t.append(time.perf_counter())
            assert st == 0
            for i, sname in enumerate(STEPS): acc[sname].append((t[i + 1] - t[i]) * 1e6)
            tot.append((t[-1] - t[0]) * 1e6)
        r = {"shape": name, "mode": mode, "ws_mb": round(fc.ws_bytes / 2**20, 1), "total_us": round(statistics.median(tot), 2),
             **{k_: round(statistics.median(v_), 2) for k_, v_ in acc.items()},
             "c_call_p90": round(sorted(acc["c_call"])[int(0.9 * REPS)], 2)}
        print(json.dumps(r), flush=True); res.append(r)
json.dump(res, open(os.path.join(out, "fc_steps.json"), "w"), indent=1)
