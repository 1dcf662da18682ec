"""Where one sage2.sageattn call's device time goes, kernel by kernel (issue 39 diagnostics): for each
shape, a few calls under torch.profiler; per kernel its start offset from the call's first kernel,
its span, and its exposed time (the part after every earlier-started kernel ended: kernels launched
to overlap their predecessor start early and wait). Also a >= 1 GiB device-to-device copy's
bandwidth (bytes read + written per second), the byte floor's denominator.

    python3 bench/stage_profile.py [--shapes flux,b4h32n1k,...|quant] [--rounds 3] [--out FILE.jsonl]
Shapes: built-in names (the scoreboard's REAL shapes, B4 H32 hd 64/128 at 1K-32K and three encoder
shapes); --shapes quant = the scoreboard's 18 `quant` shapes, the default; --shapes encoders = the
encoder shapes of at most four KV tiles. Rounds: every shape once per
round, the rounds one after the other (alternated across shapes); a shape's value is the median over
rounds of its median call. Records per shape: mode "stage_profile" per round (the kernels' list,
"quant_us" = every kernel but the attention kernel, exposed), then mode "quant_us" (field "us", the
median over rounds, with "rounds", "copy_gbps" and "path": "quantized", or "direct" when the call ran the
direct path, which has no quantize stage: us 0) as the scoreboard reads it.
"""
import os
os.environ.setdefault("SAGE2_TIERED_COMPILE", "0")  # time the optimized kernels, not a tiered first call
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
}
for _hd in (64, 128):
    for _n in (1024, 2048, 4096, 8192, 16384, 32768):
        SHAPES["b4h32-hd%d-%dk" % (_hd, _n // 1024)] = (4, 32, 32, _hd, _n, False, "fp16")
QUANT_SHAPES = [k for k in SHAPES]  # the scoreboard's `quant` group: the real shapes and B4 H32 hd 64/128 1K-32K
# Encoder shapes of at most four KV tiles (not in the group): ViT-B/16 and CLIP-L/14 / ViT-H/14 at 224.
SHAPES.update({
    "vit-b16-197": (64, 12, 12, 64, 197, False, "fp16"),
    "clip-l14-257": (32, 16, 16, 64, 257, False, "fp16"),
    "vit-h14-257": (32, 16, 16, 80, 257, False, "fp16"),
})
# Heads between one and two waves of channel_stats CTAs (not in the group): 192 (batch, kv head)
# pairs, which the walk takes (the at-once form up to 132 on an H200; clusters on sm_90a up to 173).
SHAPES.update({
    "b8h24-hd128-2k": (8, 24, 24, 128, 2048, False, "bf16"),
    "b16h12-hd64-1k": (16, 12, 12, 64, 1024, False, "fp16"),
})
# Other head dims (not in the group): a padded one and the wide ones, whose K CTAs are the largest.
SHAPES.update({
    "b4h16-hd96-2k": (4, 16, 16, 96, 2048, False, "fp16"),
    "b2h16-hd192-4k": (2, 16, 16, 192, 4096, False, "bf16"),
    "b2h16-hd256-4k": (2, 16, 16, 256, 4096, False, "bf16"),
})
ENCODER_SHAPES = ["vit-b16-197", "clip-l14-257", "vit-h14-257", "bert-large-512"]


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


def profile_call(torch, sage2, profile, ProfilerActivity, shape, calls):
    """The median call of `calls` profiled calls at `shape` (after 3 unprofiled ones): its kernels
    (name, start, span, exposed), the quantize stage's and the attention kernel's exposed time, the
    call's span, and the path ("direct" when its attention kernel is the direct path's)."""
    b, h, hkv, d, n, causal, dt = shape
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
        for _ in range(calls):
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
    grouped, cur, last_end = [], [], None
    for sp in spans:
        if last_end is not None and sp[0] - last_end > 50:
            grouped.append(cur)
            cur = []
        cur.append(sp)
        last_end = max(last_end or sp[1], sp[1])
    if cur:
        grouped.append(cur)
    for c in grouped:
        t0, frontier, rows = c[0][0], float("-inf"), []
        for st, en, nm in c:
            exposed = max(0.0, en - max(st, frontier))
            frontier = max(frontier, en)
            rows.append({"name": nm, "start": st - t0, "span": en - st, "exposed": exposed})
        per_call.append(rows)
    per_call.sort(key=lambda rows: max(r["start"] + r["span"] for r in rows))
    med = per_call[len(per_call) // 2]
    is_attn = lambda nm: nm.startswith("sage2_attention") or nm.startswith("sage2_direct")
    quant = sum(r["exposed"] for r in med if not is_attn(r["name"]))
    attn = sum(r["exposed"] for r in med if is_attn(r["name"]))
    total = max(r["start"] + r["span"] for r in med)
    path = "direct" if any(r["name"].startswith("sage2_direct") for r in med) else "quantized"
    return med, quant, attn, total, path


def merge(files, out):
    """quant_us records from the per-round stage_profile records of several one-round runs of one
    commit (rounds taken one run at a time, alternated with another build in the same device call):
    per shape the median over the runs, rounds = the number of runs; the run id names the commit."""
    per = {}
    for f in files:
        for line in open(f):
            r = json.loads(line)
            if r.get("mode") == "stage_profile":
                per.setdefault(r["shape"], []).append(r)
    commits = {r["commit"] for rs in per.values() for r in rs}
    if len(commits) != 1:
        raise SystemExit("merge: the runs measured %d commits (%s): one expected" % (len(commits), ", ".join(sorted(commits))))
    with open(out, "a") as fh:
        for name, rs in per.items():
            if len(rs) != len(files):
                raise SystemExit("merge: %s has %d rounds in %d files" % (name, len(rs), len(files)))
            us = sorted(r["quant_us"] for r in rs)[len(rs) // 2]
            gbps = sorted(r["copy_gbps"] for r in rs)[len(rs) // 2]
            r0 = rs[0]
            # (the commit in the run id: two builds alternated in one device call start their runs in
            # the same minute, and a scoreboard group is scored from one run)
            rec = {"run": r0["run"] + "-merged-" + r0["commit"][:7], "commit": r0["commit"], "mode": "quant_us", "method": "sage2",
                   "rounds": len(rs), "us": us, "copy_gbps": gbps, "shape": name,
                   **{k: r0[k] for k in ("batch", "heads", "kv_heads", "head_dim", "seq_len", "causal", "dtype", "device")},
                   "path": "/".join(sorted({r["path"] for r in rs})),
                   "command": "python3 bench/stage_profile.py --merge " + " ".join(files) + "  (runs: " + r0["command"] + ")"}
            fh.write(json.dumps(rec) + "\n")
            print("median of %d runs %-24s quant %7.1f us" % (len(rs), name, us))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="quant")
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=None)
    ap.add_argument("--merge", nargs="+", metavar="FILE",
                    help="no GPU: write to --out the quant_us records of one-round runs' stage_profile records (one commit)")
    a = ap.parse_args()
    if a.merge:
        if not a.out:
            raise SystemExit("--merge needs --out")
        return merge(a.merge, a.out)
    import torch
    import sage2
    from torch.profiler import ProfilerActivity, profile

    names = QUANT_SHAPES if a.shapes == "quant" else ENCODER_SHAPES if a.shapes == "encoders" else a.shapes.split(",")
    gbps = copy_gbps(torch)
    print("copy: %.0f GB/s" % gbps)
    run = time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()) + "-stages"
    command = "python3 bench/stage_profile.py " + " ".join(sys.argv[1:])
    device = torch.cuda.get_device_name(0)
    results = {nm: [] for nm in names}
    for rnd in range(a.rounds):
        for name in names:
            b, h, hkv, d, n, causal, dt = SHAPES[name]
            med, quant, attn, total, path = profile_call(torch, sage2, profile, ProfilerActivity, SHAPES[name], a.calls)
            results[name].append((quant, path))
            kv_bytes = 2 * b * hkv * n * d * 2
            floor = 1.5 * kv_bytes / (gbps * 1e3)  # 3T: read K, V (2T), write INT8 K + FP8 V (T)
            print("round %d %-24s quant %7.1f us (floor %6.1f, %5.2fx)  attention %7.1f us  call %7.1f us%s" % (
                rnd + 1, name, quant, floor, quant / floor, attn, total, "  (direct path)" if path == "direct" else ""))
            for r in med:
                print("    %-32s start %7.1f  span %7.1f  exposed %7.1f" % (r["name"][:32], r["start"], r["span"], r["exposed"]))
            if a.out:
                rec = {"run": run, "commit": sage2.build_commit(), "mode": "stage_profile", "round": rnd + 1, "shape": name,
                       "batch": b, "heads": h, "kv_heads": hkv, "head_dim": d, "seq_len": n, "causal": causal, "dtype": dt,
                       "quant_us": quant, "attention_us": attn, "call_us": total, "copy_gbps": gbps, "kernels": med,
                       "path": path, "device": device, "command": command}
                with open(a.out, "a") as fh:
                    fh.write(json.dumps(rec) + "\n")
    for name in names:
        b, h, hkv, d, n, causal, dt = SHAPES[name]
        vals = sorted(x for x, _ in results[name])
        us = vals[len(vals) // 2]
        paths = sorted({p for _, p in results[name]})
        print("median of %d rounds %-24s quant %7.1f us  (%s)" % (a.rounds, name, us, "/".join(paths)))
        if a.out:
            rec = {"run": run, "commit": sage2.build_commit(), "mode": "quant_us", "method": "sage2", "rounds": a.rounds,
                   "us": us, "copy_gbps": gbps, "shape": name, "batch": b, "heads": h, "kv_heads": hkv, "head_dim": d,
                   "seq_len": n, "causal": causal, "dtype": dt, "path": "/".join(paths), "device": device,
                   "command": command}
            with open(a.out, "a") as fh:
                fh.write(json.dumps(rec) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
