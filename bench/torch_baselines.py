#!/usr/bin/env python3
"""torch SDPA baselines (cuDNN, FlashAttention2, memory-efficient) for the attention benchmark.

Same shapes, timing method (CUDA events, warm-up, median) and record fields as
sage2-bench-attention, so both can be run in one device session and compared.
Usage: torch_baselines.py --head-dims 64,128 --seq-lens 1024,... --causal 0,1 --json FILE
"""
import argparse
import json

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
import torch.nn.functional as F

BACKENDS = {
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "fa2": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
}


def median_ms(fn, reps):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--head-dims", default="64,128")
    ap.add_argument("--seq-lens", default="1024,2048,4096,8192,16384,32768")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--methods", default="cudnn,fa2,efficient")
    ap.add_argument("--json", default="")
    ap.add_argument("--command", default="bench/torch_baselines.py")
    args = ap.parse_args()
    dev = torch.cuda.get_device_name(0)
    recs = []
    for d in map(int, args.head_dims.split(",")):
        for causal in map(int, args.causal.split(",")):
            for n in map(int, args.seq_lens.split(",")):
                q, k, v = (torch.randn(args.batch, args.heads, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
                ops = 4.0 * args.batch * args.heads * n * n * d / (2.0 if causal else 1.0)
                for m in args.methods.split(","):
                    try:
                        with sdpa_kernel([BACKENDS[m]]):
                            ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal)), args.reps)
                    except Exception as e:  # backend unavailable for this shape
                        print(f"{m:8s} d={d} causal={causal} N={n}: unavailable ({type(e).__name__})")
                        continue
                    tops = ops / (ms * 1e-3) / 1e12
                    print(f"{m:8s} {'e2e':7s} {d:4d} {causal:6d} {n:6d} {ms:10.3f} {tops:9.1f}")
                    recs.append(dict(method=m, mode="e2e", head_dim=d, causal=bool(causal), seq_len=n,
                                     batch=args.batch, heads=args.heads, dtype="fp16", ms=round(ms, 4),
                                     tops=round(tops, 2), device=dev, command=args.command))
                del q, k, v
    if args.json:
        with open(args.json, "w") as f:
            for r in recs:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
