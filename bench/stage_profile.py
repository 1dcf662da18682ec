"""Where one sage2.sageattn call's device time goes, kernel by kernel (issue 39 diagnostics): for each
shape, a few calls under torch.profiler; per kernel its start offset from the call's first kernel,
its span, and its exposed time (the part after every earlier-started kernel ended: kernels launched
to overlap their predecessor start early and wait). Also a >= 1 GiB device-to-device copy's
bandwidth (bytes read + written per second), the byte floor's denominator.

    python3 bench/stage_profile.py [--shapes flux,b4h32n1k,...] [--out FILE.jsonl]
Shapes: name=B,H,HKV,HD,N,causal,dtype (built-ins: the scoreboard's REAL shapes and B4 H32 hd 64/128 at
1K and 8K). Records: mode "stage_profile" with the kernels' list, "quant_us" (every kernel but the
attention kernel, exposed) and "copy_gbps".
"""
import argparse
import json
import sys
import time

SHAPES = {
    "flux-1024": (1, 24, 24, 128, 4608, False, "bf16"),
    "sdxl-1024": (2, 10, 10, 64, 4096, False, "fp16"),
    "qwen2.5-7b-prefill-4k": (1, 28, 4, 128, 4096, True, "bf16"),
    "whisper-large-enc": (4, 20, 20, 64, 1500, False, "fp16"),
    "dit-xl-512": (8, 16, 16, 72, 1024, False, "fp16"),
    "bert-large-512": (32, 16, 16, 64, 512, False, "fp16"),
    "b4h32-hd128-1k": (4, 32, 32, 128, 1024, False, "fp16"),
    "b4h32-hd128-8k": (4, 32, 32, 128, 8192, False, "fp16"),
    "b4h32-hd64-1k": (4, 32, 32, 64, 1024, False, "fp16"),
    "b4h32-hd64-8k": (4, 32, 32, 64, 8192, False, "fp16"),
}


def copy_gbps(torch):
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    a.fill_(1)
    for _ in range(2):
        b.copy_(a)
    torch.cuda.synchronize()
    ts = []
    for _ in range(5):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        b.copy_(a)
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e))
    ms = sorted(ts)[2]
    return 2 * n / (ms * 1e-3) / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    import torch
    import sage2
    from torch.profiler import ProfilerActivity, profile

    gbps = copy_gbps(torch)
    print("copy: %.0f GB/s" % gbps)
    run = time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()) + "-stages"
    for name in a.shapes.split(","):
        b, h, hkv, d, n, causal, dt = SHAPES[name]
        dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[dt]
        g = torch.Generator(device="cuda").manual_seed(7)
        q = torch.randn((b, h, n, d), dtype=dtype, device="cuda", generator=g)
        k = torch.randn((b, hkv, n, d), dtype=dtype, device="cuda", generator=g)
        v = torch.randn((b, hkv, n, d), dtype=dtype, device="cuda", generator=g)
        flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
        f = lambda: sage2.sageattn(q, k, v, tensor_layout="HND", is_causal=causal)
        for _ in range(3):
            f()
        torch.cuda.synchronize()
        per_call = []
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(a.calls):
                flush.zero_()
                torch.cuda.synchronize()
                f()
                torch.cuda.synchronize()
        spans = []
        for e in prof.events():
            dtp = getattr(e, "device_type", None)
            if str(getattr(dtp, "name", dtp)).upper() != "CUDA":
                continue
            tr = e.time_range
            if tr.end > tr.start and "sage2" in e.name:
                spans.append((float(tr.start), float(tr.end), e.name))
        spans.sort()
        # Group into calls: a gap of > 50 us between a kernel's start and the previous end starts a call.
        calls, cur, last_end = [], [], None
        for s in spans:
            if last_end is not None and s[0] - last_end > 50:
                calls.append(cur)
                cur = []
            cur.append(s)
            last_end = max(last_end or s[1], s[1])
        if cur:
            calls.append(cur)
        for c in calls:
            t0, frontier, rows = c[0][0], float("-inf"), []
            for s, e, nm in c:
                exposed = max(0.0, e - max(s, frontier))
                frontier = max(frontier, e)
                rows.append({"name": nm, "start": s - t0, "span": e - s, "exposed": exposed})
            per_call.append(rows)
        med = per_call[len(per_call) // 2]
        quant = sum(r["exposed"] for r in med if not r["name"].startswith("sage2_attention"))
        attn = sum(r["exposed"] for r in med if r["name"].startswith("sage2_attention"))
        total = max(r["start"] + r["span"] for r in med)
        kv_bytes = 2 * b * hkv * n * d * 2
        floor = 1.5 * kv_bytes / (gbps * 1e3)  # 3T: read K, V (2T), write INT8 K + FP8 V (T)
        print("%-24s quant %7.1f us (floor %6.1f, %5.2fx)  attention %7.1f us  call %7.1f us" % (
            name, quant, floor, quant / floor, attn, total))
        for r in med:
            print("    %-32s start %7.1f  span %7.1f  exposed %7.1f" % (r["name"][:32], r["start"], r["span"], r["exposed"]))
        if a.out:
            rec = {"run": run, "commit": sage2.build_commit(), "mode": "stage_profile", "shape": name, "batch": b,
                   "heads": h, "kv_heads": hkv, "head_dim": d, "seq_len": n, "causal": causal, "dtype": dt,
                   "quant_us": quant, "attention_us": attn, "call_us": total, "copy_gbps": gbps, "kernels": med,
                   "device": torch.cuda.get_device_name(0), "command": "python3 bench/stage_profile.py " + " ".join(sys.argv[1:])}
            with open(a.out, "a") as fh:
                fh.write(json.dumps(rec) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
