#!/usr/bin/env python3
"""Masked attention (issue 17): a call with an attn_mask through sage2.patch_sdpa against torch's own
scaled_dot_product_attention with the same mask (the backend torch picks), in one process.

    PYTHONPATH=python SAGE2_LIBRARY=build/libsage2.so python3 bench/mask_bench.py --out FILE [--run ID]

Masks (hd 128, fp16, B sequences of N tokens, H heads unless options say otherwise):
  key_padding     bool [B, 1, 1, N]: batch b sees keys < len_b (len_b random in [N/2, N], fixed seed)
  additive_pad    the same as an additive fp16 mask, 0 / finfo.min (Hugging Face's form)
  causal_padding  bool [B, 1, N, N]: causal and key padding together
  prefix_lm       bool [1, 1, N, N]: keys < N/4 visible to every row, causal after
Both methods get the same tensors and the same mask; the patched call must not fall back (checked
through p.stats). TOPS = 4·B·H·N²·D / time for both (nominal work: the ratio is what counts).
Timing: CUDA events around each call, synchronised per call, median of --reps after --warmup;
--rounds R alternates the two methods in R rounds of reps/R calls (the median over all of them).
Records (JSON lines, appended to --out): run, method ("sage2" | "sdpa"), mode "e2e", head_dim,
causal (0), seq_len, batch, heads, dtype, tops, ms, device, command, commit, mask (the kind), reps.
"""
import argparse
import datetime
import json
import os
os.environ.setdefault("SAGE2_TIERED_COMPILE", "0")  # time the optimized kernels, not a tiered first call
import random
import shlex
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scoreboard_bench import device_name, event_times_ms, git_commit, ints, short_device  # noqa: E402

KINDS = ("key_padding", "additive_pad", "causal_padding", "prefix_lm")


def make_mask(torch, kind, b, n, seed):
    rng = random.Random(seed)
    lens = torch.tensor([rng.randint(n // 2, n) for _ in range(b)], device="cuda")
    keys = torch.arange(n, device="cuda")[None, :] < lens[:, None]  # [B, N]
    if kind == "key_padding":
        return keys[:, None, None, :]
    if kind == "additive_pad":
        m = torch.zeros(b, 1, 1, n, dtype=torch.float16, device="cuda")
        return m.masked_fill(~keys[:, None, None, :], torch.finfo(torch.float16).min)
    causal = torch.ones(n, n, dtype=torch.bool, device="cuda").tril()
    if kind == "causal_padding":
        return causal[None, None] & keys[:, None, None, :]
    if kind == "prefix_lm":
        m = causal.clone()
        m[:, : n // 4] = True
        return m[None, None]
    raise ValueError(kind)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--run", default="")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seq-lens", default="2048,4096,8192")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--command", default="")
    ap.add_argument("--profile", action="store_true", help="also print the sage2 call's per-kernel GPU times")
    ap.add_argument("--rounds", type=int, default=1,
                    help="alternate the two methods in this many rounds of reps/rounds calls (median over all)")
    a = ap.parse_args()
    import torch
    import torch.nn.functional as F
    import sage2
    dev = device_name()
    run = a.run or datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%MZ") + "-" + short_device(dev) + "-mask"
    command = a.command or "python3 bench/mask_bench.py " + " ".join(shlex.quote(x) for x in sys.argv[1:])
    commit = git_commit()
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    t0 = time.time()
    for n in ints(a.seq_lens):
        b, h, d = a.batch, a.heads, a.head_dim
        g = torch.Generator(device="cuda")
        g.manual_seed(n)
        q, k, v = (torch.randn(b, h, n, d, generator=g, device="cuda", dtype=torch.float16) for _ in range(3))
        for kind in a.kinds.split(","):
            mask = make_mask(torch, kind, b, n, seed=n)
            patch = sage2.patch_sdpa()
            patched = F.scaled_dot_product_attention
            patch.restore()
            ref = F.scaled_dot_product_attention
            rows = []
            fns = {"sage2": lambda: patched(q, k, v, attn_mask=mask), "sdpa": lambda: ref(q, k, v, attn_mask=mask)}
            pooled = {}
            per = max(1, a.reps // max(1, a.rounds))
            for r in range(max(1, a.rounds)):  # ABAB…: a drift of the GPU clock hits both alike
                for method in list(fns):
                    try:
                        pooled.setdefault(method, []).extend(event_times_ms(torch, fns[method], per,
                                                                             a.warmup if r == 0 else 1))
                    except Exception as e:  # noqa: BLE001 - reported, the other goes on
                        print("[%6.1fs] FAILED %s %s N=%d: %s" % (time.time() - t0, method, kind, n, e), flush=True)
                        pooled.pop(method, None)
                        del fns[method]
            for method, t in pooled.items():
                t.sort()
                rows.append((method, t[len(t) // 2]))
            fb = patch.stats.as_dict()["fallback"]
            if fb:
                print("[%6.1fs] %s N=%d: sage2 fell back %s; its record is dropped" % (time.time() - t0, kind, n, fb))
                rows = [r for r in rows if r[0] != "sage2"]
            # accuracy check of the measured call (not a record): cosine of sage2 vs torch
            with sage2.patch_sdpa():
                o1 = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).float()
            o2 = ref(q, k, v, attn_mask=mask).float()
            cos = torch.nn.functional.cosine_similarity(o1.flatten(), o2.flatten(), dim=0).item()
            line = []
            with open(a.out, "a") as f:
                for method, ms in rows:
                    tops = 4.0 * b * h * n * n * d / (ms * 1e-3) / 1e12
                    line.append("%s %.3f ms %.1f TOPS" % (method, ms, tops))
                    f.write(json.dumps(dict(run=run, method=method, mode="e2e", head_dim=d, causal=0, seq_len=n, batch=b,
                                            heads=h, dtype="fp16", tops=tops, ms=ms, device=dev, command=command,
                                            commit=commit, mask=kind, reps=a.reps, rounds=a.rounds)) + "\n")
            print("[%6.1fs] N=%-6d %-15s %s  cos %.5f" % (time.time() - t0, n, kind, "  ".join(line), cos), flush=True)
            if a.profile:
                from torch.profiler import ProfilerActivity, profile
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    for _ in range(5):
                        patched(q, k, v, attn_mask=mask)
                    torch.cuda.synchronize()
                for e in sorted(prof.key_averages(), key=lambda e: -getattr(e, "self_device_time_total", 0)):
                    t = getattr(e, "self_device_time_total", 0) / 5
                    if t > 0:
                        print("           %8.1f us  %s" % (t, e.key[:80]))
            del mask
        del q, k, v
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
