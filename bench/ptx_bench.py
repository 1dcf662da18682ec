#!/usr/bin/env python3
"""Another arch's mma.sync path through PTX on this GPU, beside the reference's kernel for that arch
(issue 31, scoreboard group `ptx`). Run once per arch, in a process whose SAGE2_TARGET_ARCH is that
arch (sage2's Context then generates the arch's path as PTX, which the driver JIT-compiles here):

  sm_80: sage2.sageattn(pv_accum="fp32" | "fp16") (INT8 QK, FP16 P~V) against the reference's
         sageattn_qk_int8_pv_fp16_cuda(pv_accum_dtype="fp32" | "fp16")
  sm_89: sage2.sageattn(pv_accum="fp32" | "fp16") (INT8 QK, FP8 P~V) against the reference's
         sageattn_qk_int8_pv_fp8_cuda(pv_accum_dtype="fp32+fp32" | "fp32+fp16")

Both are called as their users call them (end to end: quantization + attention), on the same seeded
fp16 inputs (B 4, H 32, HND), methods alternated over --rounds rounds; each value is the median of
the round medians. Accuracy (rel-L1 and cos against fp32 attention of the same inputs) is taken at
the first sequence length on gaussian and channel-biased data.

Records (JSONL, DESIGN.md "Benchmark records"): run, commit (the library's), env, method ("sage2" |
"sage2_ref"), mode "e2e", target_arch, pv_accum (the reference's name of the accumulator), head_dim,
causal, seq_len, batch, heads, dtype, tops, ms, rounds, round_ms, device, command; accuracy records
carry mode "accuracy", data, rel_l1, cos.

  PYTHONPATH=python:.anchors-ref-mma SAGE2_LIBRARY=.dev/libsage2.so SAGE2_TARGET_ARCH=sm_80 \\
      python3 bench/ptx_bench.py --out FILE --run RUN_ID
"""
import argparse
import json
import os
os.environ.setdefault("SAGE2_TIERED_COMPILE", "0")  # time the optimized kernels, not a tiered first call
import statistics
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scoreboard_bench import add_shape_args, event_times_ms, ints  # noqa: E402

# target arch -> [(reference pv_accum_dtype, sage2 pv_accum)]
ACCUMULATORS = {"sm_80": [("fp32", "fp32"), ("fp16", "fp16")],
                "sm_89": [("fp32+fp32", "fp32"), ("fp32+fp16", "fp16")]}


def inputs(torch, b, h, n, d, data):
    g = torch.Generator(device="cuda")
    g.manual_seed(zlib.crc32(repr((b, h, n, d, data)).encode()))

    def mk():
        x = torch.randn(b, h, n, d, generator=g, device="cuda")
        if data == "biased":  # a per-channel offset plus noise (the accuracy study's inputs)
            x = x + torch.randn(1, 1, 1, d, generator=g, device="cuda") * 2.0
        return x.half()
    return mk(), mk(), mk()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--run", required=True, help="run id shared by both arch processes")
    add_shape_args(ap)
    ap.add_argument("--accuracy-batch", type=int, default=1, help="batch of the accuracy inputs")
    a = ap.parse_args()
    arch = os.environ.get("SAGE2_TARGET_ARCH", "")
    if arch not in ACCUMULATORS:
        sys.exit("ptx_bench: set SAGE2_TARGET_ARCH to one of %s" % ", ".join(ACCUMULATORS))
    import torch
    import torch.nn.functional as F
    import sage2
    import sageattention as ref

    ref_fn = ref.sageattn_qk_int8_pv_fp16_cuda if arch == "sm_80" else ref.sageattn_qk_int8_pv_fp8_cuda
    commit = sage2.build_commit()
    env = {k: v for k, v in sorted(os.environ.items()) if k.startswith("SAGE2_")}
    device = torch.cuda.get_device_name(0)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    out = open(a.out, "a")
    accs = ACCUMULATORS[arch]

    def calls(q, k, v, causal):
        m = {}
        for ref_acc, s2_acc in accs:
            m[("sage2", ref_acc)] = (lambda acc=s2_acc: sage2.sageattn(q, k, v, is_causal=causal, pv_accum=acc))
            m[("sage2_ref", ref_acc)] = (lambda acc=ref_acc: ref_fn(q, k, v, tensor_layout="HND", is_causal=causal,
                                                                      pv_accum_dtype=acc))
        return m

    def base(method, acc, d, n, causal, b):
        return dict(run=a.run, commit=commit, env=env, method=method, target_arch=arch, pv_accum=acc,
                    head_dim=d, causal=causal, seq_len=n, batch=b, heads=a.heads, dtype="fp16",
                    device=device, command=" ".join(sys.argv))

    for d in ints(a.head_dims):
        for causal in (bool(int(c)) for c in a.causal.split(",")):
            # accuracy at the first length, both data kinds
            n0 = ints(a.seq_lens)[0]
            for data in ("gaussian", "biased"):
                q, k, v = inputs(torch, a.accuracy_batch, a.heads, n0, d, data)
                want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
                for (method, acc), fn in calls(q, k, v, causal).items():
                    o = fn().float()
                    rel = float((o - want).abs().sum() / want.abs().sum())
                    cos = float(F.cosine_similarity(o.flatten(), want.flatten(), dim=0))
                    rec = base(method, acc, d, n0, causal, a.accuracy_batch)
                    rec.update(mode="accuracy", data=data, rel_l1=round(rel, 6), cos=round(cos, 7))
                    out.write(json.dumps(rec) + "\n")
                    print("%s %s hd%d causal=%d %s %s: rel-L1 %.5f cos %.6f" % (arch, data, d, causal, method, acc,
                                                                               rel, cos), flush=True)
                del q, k, v, want
            for n in ints(a.seq_lens):
                b = a.batch
                q, k, v = inputs(torch, b, a.heads, n, d, "gaussian")
                fns = calls(q, k, v, causal)
                names = list(fns)
                per = {m: [] for m in names}
                for r in range(a.rounds):
                    order = names[r % len(names):] + names[:r % len(names)]
                    for m in order:
                        per[m].append(statistics.median(event_times_ms(torch, fns[m], a.reps, 2, flush)))
                ops = 4.0 * b * a.heads * n * n * d / (2.0 if causal else 1.0)
                line = []
                for m in names:
                    ms = statistics.median(per[m])
                    rec = base(m[0], m[1], d, n, causal, b)
                    rec.update(mode="e2e", tops=round(ops / (ms * 1e-3) / 1e12, 2), ms=round(ms, 4),
                               rounds=a.rounds, round_ms=[round(x, 4) for x in per[m]])
                    out.write(json.dumps(rec) + "\n")
                    line.append("%s/%s %.0f" % (m[0], m[1], rec["tops"]))
                print("%s hd%d N%d causal=%d TOPS: %s" % (arch, d, n, causal, " | ".join(line)), flush=True)
                out.flush()
                del q, k, v, fns


if __name__ == "__main__":
    main()
