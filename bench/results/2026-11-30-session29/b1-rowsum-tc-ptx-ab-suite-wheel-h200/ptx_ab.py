"""sage2's mma.sync path through PTX (SAGE2_TARGET_ARCH) timed end to end, one library per process:
the fused-exponent A/B. Appends one JSON line per cell to --out."""
import argparse, json, os, statistics, sys, zlib
os.environ.setdefault("SAGE2_TIERED_COMPILE", "0")
import torch, sage2
ap = argparse.ArgumentParser(); ap.add_argument("--out", required=True); ap.add_argument("--tag", required=True)
ap.add_argument("--round", type=int, default=0); a = ap.parse_args()
arch = os.environ["SAGE2_TARGET_ARCH"]; commit = sage2.build_commit()
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
def times(fn, reps=20):
    for _ in range(2): fn()
    ts = []
    for _ in range(reps):
        flush.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); e.synchronize(); ts.append(s.elapsed_time(e))
    return statistics.median(ts)
out = open(a.out, "a")
for d in (64, 128):
    for causal in (False, True):
        for n in (2048, 8192):
            g = torch.Generator(device="cuda"); g.manual_seed(zlib.crc32(repr((4, 32, n, d)).encode()))
            q, k, v = (torch.randn(4, 32, n, d, generator=g, device="cuda").half() for _ in range(3))
            for acc in ("fp32", "fp16"):
                ms = times(lambda: sage2.sageattn(q, k, v, is_causal=causal, pv_accum=acc))
                ops = 4.0 * 4 * 32 * n * n * d / (2.0 if causal else 1.0)
                rec = dict(tag=a.tag, round=a.round, commit=commit, arch=arch, head_dim=d, causal=causal, seq_len=n,
                           pv_accum=acc, ms=round(ms, 4), tops=round(ops / ms / 1e9, 1))
                out.write(json.dumps(rec) + "\n"); out.flush()
                print(a.tag, arch, d, int(causal), n, acc, rec["tops"], flush=True)
            del q, k, v
