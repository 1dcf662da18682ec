#!/usr/bin/env python3
"""P~V precision and arch paths on one GPU (issue 23): speed and accuracy of sage2.sageattn with
pv_precision "auto" (FP8; the wgmma family on sm_90a) and "fp16" (the mma.sync family), against
torch SDPA's cuDNN backend, on the same seeded channel-biased inputs, methods alternated over
--rounds rounds (median of the round medians). Run it once per path: SAGE2_TARGET_ARCH=sm_80 makes
the process's Context generate the Ampere path as PTX (FP16 P~V), sm_89 the Ada/Blackwell mma.sync
path (FP8 P~V, lowered to f16 mma on sm_90).

Records (JSONL; not scoreboard cells: "path" set): run, commit (the library's), env, method
("sage2" or "cudnn"), mode "e2e", path ("native" or the target), pv_precision, head_dim, causal,
seq_len, batch, heads, dtype, tops, ms, rounds, rel_l1 and cos (vs fp32 attention of the same
inputs, sage2 only).

  PYTHONPATH=python SAGE2_LIBRARY=.dev/libsage2.so [SAGE2_TARGET_ARCH=sm_80] \\
      python3 bench/pv_precision_bench.py --out FILE [--head-dims 64,128] [--seq-lens 2048,8192]
"""
import argparse
import datetime
import json
import os
os.environ.setdefault("SAGE2_TIERED_COMPILE", "0")  # time the optimized kernels, not a tiered first call
import statistics
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scoreboard_bench import add_shape_args, event_times_ms, ints  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    add_shape_args(ap)
    ap.add_argument("--run", default="")
    a = ap.parse_args()
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import sage2

    path = os.environ.get("SAGE2_TARGET_ARCH") or "native"
    run = a.run or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ") + "-pv-" + path
    commit = sage2.build_commit() if hasattr(sage2, "build_commit") else None
    env = {k: v for k, v in sorted(os.environ.items()) if k.startswith("SAGE2_")}
    device = torch.cuda.get_device_name(0)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    pvs = ["fp16"] if path == "sm_80" else ["auto", "fp16"]
    out = open(a.out, "a")
    for d in ints(a.head_dims):
        for n in ints(a.seq_lens):
            for causal in (bool(int(c)) for c in a.causal.split(",")):
                b, h = a.batch, a.heads
                g = torch.Generator(device="cuda")
                g.manual_seed(zlib.crc32(repr((b, h, n, d)).encode()))
                # channel-biased, as the accuracy study's inputs: a per-channel offset plus noise
                def mk():
                    bias = torch.randn(1, 1, 1, d, generator=g, device="cuda") * 2.0
                    return (torch.randn(b, h, n, d, generator=g, device="cuda") + bias).half()
                q, k, v = mk(), mk(), mk()
                ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
                methods = {"cudnn": None}
                for pv in pvs:
                    methods["sage2:" + pv] = pv

                def call(m):
                    if m == "cudnn":
                        def f():
                            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                        return f
                    pv = methods[m]
                    return lambda: sage2.sageattn(q, k, v, is_causal=causal, pv_precision=pv,
                                                  small_q_path="quantized")
                acc = {}
                for m in methods:
                    if m != "cudnn":
                        o = call(m)().float()
                        acc[m] = (float((o - ref).abs().sum() / ref.abs().sum()),
                                  float(F.cosine_similarity(o.flatten(), ref.flatten(), dim=0)))
                per = {m: [] for m in methods}
                names = list(methods)
                for r in range(a.rounds):
                    order = names[r % len(names):] + names[:r % len(names)]
                    for m in order:
                        per[m].append(statistics.median(event_times_ms(torch, call(m), a.reps, 2, flush)))
                ops = 4.0 * b * h * n * n * d / (2.0 if causal else 1.0)
                line = []
                for m in names:
                    ms = statistics.median(per[m])
                    rec = dict(run=run, commit=commit, env=env, method=m.split(":")[0], mode="e2e", path=path,
                               pv_precision=methods[m], head_dim=d, causal=causal, seq_len=n, batch=b, heads=h,
                               dtype="fp16", tops=round(ops / (ms * 1e-3) / 1e12, 2), ms=round(ms, 4),
                               rounds=a.rounds, round_ms=[round(x, 4) for x in per[m]], device=device,
                               command=" ".join(sys.argv))
                    if m in acc:
                        rec["rel_l1"], rec["cos"] = round(acc[m][0], 6), round(acc[m][1], 7)
                    out.write(json.dumps(rec) + "\n")
                    line.append("%s %.0f TOPS%s" % (m, rec["tops"], " relL1 %.4f" % acc[m][0] if m in acc else ""))
                print("%s d=%d N=%d causal=%d: %s" % (path, d, n, causal, " | ".join(line)), flush=True)
                out.flush()


if __name__ == "__main__":
    main()
