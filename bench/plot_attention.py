#!/usr/bin/env python3
"""sage2 (end to end, through the Python binding) vs torch SDPA (cuDNN, FlashAttention2,
memory-efficient) in one run, and a TOPS-vs-sequence-length plot per head dim (like Fig. 5 of
the SageAttention2 paper).

    PYTHONPATH=python SAGE2_LIBRARY=build/libsage2.so python3 bench/plot_attention.py --out bench/results/<run folder>/python/

Writes OUT/attention_e2e.jsonl (one JSON record per method and shape; fields as
bench/torch_baselines.py and sage2-bench-attention: method, mode="e2e", head_dim, causal, seq_len,
batch, heads, dtype, ms, tops, device, command) and OUT/attention_e2e_hd{64,128,256}.png.
TOPS = 4·B·H·N²·d / time, halved when causal. Timing: CUDA events around each call on the
current stream, warm-up first (sage2's first call compiles or loads its kernels), median of the
timed calls; this includes a method's host overhead wherever it exceeds the GPU work, so calls
under 5 ms also get `ms_pipelined`, the mean of 20 back-to-back calls. Inputs: N(0,1) fp16 (the
benchmark convention). A backend that cannot run a shape is skipped and reported.
`--plot-only FILE` redraws the plots from a JSONL file.
"""
import argparse
import contextlib
import json
import math
import os
os.environ.setdefault("SAGE2_TIERED_COMPILE", "0")  # time the optimized kernels, not a tiered first call
import sys
import time

METHODS = ["sage2", "cudnn", "fa2", "efficient"]
LABELS = {"sage2": "sage2 (e2e, Python)", "cudnn": "SDPA cuDNN", "fa2": "SDPA FlashAttention2",
          "efficient": "SDPA mem-efficient"}
COLORS = {"sage2": "#d62728", "cudnn": "#1f77b4", "fa2": "#2ca02c", "efficient": "#9467bd"}


def parse_list(s):
    return [int(x) for x in s.split(",") if x]


def seq_label(n):
    return "%dK" % (n // 1024) if n % 1024 == 0 else str(n)


# ---- measurement -------------------------------------------------------------------------------
def median_ms(torch, fn, min_reps, max_reps, target_s):
    """Warm-up, then CUDA-event timings of single calls; the number of reps adapts so that one
    measurement takes about target_s (long calls get min_reps)."""
    fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    fn()
    b.record()
    b.synchronize()
    est = max(a.elapsed_time(b), 1e-3)
    reps = int(max(min_reps, min(max_reps, target_s * 1e3 / est)))
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2], reps


def pipelined_ms(torch, fn, calls):
    """Mean time of `calls` back-to-back calls between two events: the host runs ahead, so
    per-call host overhead is hidden whenever the GPU work is longer (how a model sees it)."""
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    a.record()
    for _ in range(calls):
        fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / calls


def cos_sim(torch, a, b):
    dot = na = nb = 0.0
    for i in range(a.shape[0]):  # per batch: bounded fp32 temporaries
        x, y = a[i].float().flatten(), b[i].float().flatten()
        dot += float(torch.dot(x, y))
        na += float(torch.dot(x, x))
        nb += float(torch.dot(y, y))
    return dot / math.sqrt(max(na * nb, 1e-300))


def run(args):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    try:
        import sage2
    except ImportError:  # run from a checkout without PYTHONPATH=python
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
        import sage2

    if not torch.cuda.is_available():
        print("plot_attention: no CUDA device (torch %s); nothing measured" % torch.__version__)
        return []
    backends = {"cudnn": SDPBackend.CUDNN_ATTENTION, "fa2": SDPBackend.FLASH_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION}
    dev = torch.cuda.get_device_name()
    command = args.command or ("PYTHONPATH=python SAGE2_LIBRARY=%s python3 %s"
                               % (os.environ.get("SAGE2_LIBRARY", ""), " ".join(sys.argv)))
    methods = [m for m in args.methods.split(",") if m]
    sage_opts = {}
    if args.qk_bits:
        sage_opts["qk_bits"] = args.qk_bits
    recs = []
    print("device: %s; torch %s; sage2 library %s" % (dev, torch.__version__, sage2.library_path()))
    print("%-10s %4s %6s %6s %10s %9s %5s  %s" % ("method", "d", "causal", "N", "ms", "TOPS", "reps", "note"))
    t_start = time.time()
    for d in parse_list(args.head_dims):
        for causal in parse_list(args.causal):
            for n in parse_list(args.seq_lens):
                shape = (args.batch, args.heads, n, d)
                g = torch.Generator(device="cuda").manual_seed(n + d)
                try:
                    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.float16, generator=g) for _ in range(3))
                except torch.cuda.OutOfMemoryError:
                    print("d=%d N=%d: inputs do not fit in memory, skipped" % (d, n))
                    continue
                ops = 4.0 * args.batch * args.heads * n * n * d / (2.0 if causal else 1.0)
                outs = {}
                for m in methods:
                    note = ""
                    try:
                        if m == "sage2":
                            def fn():
                                return sage2.sageattn(q, k, v, is_causal=bool(causal), **sage_opts)
                            t0 = time.time()
                            fn()
                            torch.cuda.synchronize()
                            note = "first call %.2f s" % (time.time() - t0)
                            scope = contextlib.nullcontext()
                        else:
                            def fn():
                                return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
                            # the backend is pinned once around the measurement (as in torch_baselines.py),
                            # not per call: the context manager's own cost is not SDPA's
                            scope = sdpa_kernel([backends[m]])
                        with scope:
                            ms, reps = median_ms(torch, fn, args.min_reps, args.max_reps, args.target_s)
                            # host overhead only matters for short calls: measure back-to-back there
                            ms_pipe = pipelined_ms(torch, fn, 20) if args.pipelined and ms < 5.0 else None
                            if m in ("sage2", "cudnn") or (m == "fa2" and "cudnn" not in outs):
                                outs[m] = fn()
                    except Exception as e:  # backend unavailable for this shape (or out of memory)
                        print("%-10s %4d %6d %6d %10s %9s %5s  unavailable: %s" % (
                            m, d, causal, n, "-", "-", "-", (type(e).__name__ + ": " + str(e)).splitlines()[0][:90]))
                        torch.cuda.empty_cache()
                        continue
                    tops = ops / (ms * 1e-3) / 1e12
                    rec = dict(method=m, mode="e2e", head_dim=d, causal=bool(causal), seq_len=n, batch=args.batch,
                               heads=args.heads, dtype="fp16", ms=round(ms, 4), tops=round(tops, 2), device=dev,
                               command=command)
                    if ms_pipe is not None:
                        rec["ms_pipelined"] = round(ms_pipe, 4)
                        note = ("pipelined %.3f ms; " % ms_pipe) + note
                    if m == "sage2":
                        rec["qk_bits"] = args.qk_bits or "auto"
                    recs.append(rec)
                    print("%-10s %4d %6d %6d %10.3f %9.1f %5d  %s" % (m, d, causal, n, ms, tops, reps, note))
                if "sage2" in outs:
                    other = "cudnn" if "cudnn" in outs else ("fa2" if "fa2" in outs else None)
                    if other:
                        c = cos_sim(torch, outs["sage2"], outs[other])
                        for r in recs[::-1]:
                            if r["method"] == "sage2" and r["head_dim"] == d and r["seq_len"] == n and \
                                    r["causal"] == bool(causal):
                                r["cos_vs_" + other] = round(c, 6)
                                break
                        print("%-10s sage2 vs %s output cosine %.5f (N(0,1) inputs: outputs are small)" % (
                            "", other, c))
                del q, k, v, outs
                torch.cuda.empty_cache()
    print("measured in %.0f s" % (time.time() - t_start))
    return recs


# ---- plots ---------------------------------------------------------------------------------------
def plot(recs, out_dir):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    for d in sorted({r["head_dim"] for r in recs}):
        sub = [r for r in recs if r["head_dim"] == d and r.get("mode", "e2e") == "e2e"]
        causals = sorted({r["causal"] for r in sub})
        fig, axes = plt.subplots(1, len(causals), figsize=(6.5 * len(causals), 4.6), squeeze=False)
        device = sub[0].get("device", "") if sub else ""
        for ax, causal in zip(axes[0], causals):
            rows = [r for r in sub if r["causal"] == causal]
            lens = sorted({r["seq_len"] for r in rows})
            methods = [m for m in METHODS if any(r["method"] == m for r in rows)]
            methods += sorted({r["method"] for r in rows} - set(methods))
            width = 0.8 / max(1, len(methods))
            for i, m in enumerate(methods):
                xs, ys = [], []
                for j, n in enumerate(lens):
                    hit = [r["tops"] for r in rows if r["method"] == m and r["seq_len"] == n]
                    if hit:
                        xs.append(j + (i - (len(methods) - 1) / 2) * width)
                        ys.append(hit[0])
                bars = ax.bar(xs, ys, width, label=LABELS.get(m, m), color=COLORS.get(m))
                for bx, by in zip(bars, ys):
                    ax.text(bx.get_x() + bx.get_width() / 2, by, "%d" % round(by), ha="center", va="bottom",
                            fontsize=6.5, rotation=90 if len(methods) * len(lens) > 28 else 0)
            ax.set_xticks(range(len(lens)))
            ax.set_xticklabels([seq_label(n) for n in lens])
            ax.set_xlabel("sequence length")
            ax.set_ylabel("TOPS")
            ax.set_title("headdim %d, causal %s" % (d, "True" if causal else "False"))
            top = max([r["tops"] for r in rows] + [1])
            ax.set_ylim(0, top * 1.18)
            ax.grid(axis="y", alpha=0.3)
            ax.legend(fontsize=8, loc="upper left")
        b = sub[0]["batch"] if sub else 0
        h = sub[0]["heads"] if sub else 0
        fig.suptitle("Attention throughput, %s, fp16, B=%d, H=%d (end to end)" % (device, b, h), fontsize=11)
        fig.tight_layout()
        path = os.path.join(out_dir, "attention_e2e_hd%d.png" % d)
        fig.savefig(path, dpi=130)
        plt.close(fig)
        files.append(path)
    return files


def summary(recs):
    """sage2's TOPS and its ratio to the best torch backend, per shape."""
    lines = ["%4s %6s %6s %9s %9s %-10s %6s" % ("d", "causal", "N", "sage2", "best SDPA", "(backend)", "x")]
    keys = sorted({(r["head_dim"], r["causal"], r["seq_len"]) for r in recs})
    for d, c, n in keys:
        rows = [r for r in recs if (r["head_dim"], r["causal"], r["seq_len"]) == (d, c, n)]
        s = [r["tops"] for r in rows if r["method"] == "sage2"]
        others = [(r["tops"], r["method"]) for r in rows if r["method"] != "sage2"]
        best = max(others) if others else (float("nan"), "-")
        if s:
            ratio = s[0] / best[0] if others else float("nan")
            lines.append("%4d %6d %6d %9.1f %9.1f %-10s %6.2f" % (d, c, n, s[0], best[0], best[1], ratio))
        else:
            lines.append("%4d %6d %6d %9s %9.1f %-10s %6s" % (d, c, n, "-", best[0], best[1], "-"))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="bench/results", help="output directory (created)")
    ap.add_argument("--head-dims", default="64,128,256")
    ap.add_argument("--seq-lens", default="1024,2048,4096,8192,16384,32768")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--qk-bits", type=int, default=0, help="sage2 qk_bits (0: auto)")
    ap.add_argument("--min-reps", type=int, default=5)
    ap.add_argument("--max-reps", type=int, default=30)
    ap.add_argument("--target-s", type=float, default=0.4, help="timed seconds per measurement (approx.)")
    ap.add_argument("--no-pipelined", dest="pipelined", action="store_false",
                    help="skip the back-to-back measurement (field ms_pipelined)")
    ap.add_argument("--command", default="", help="command text stored in the records")
    ap.add_argument("--prefix", default="attention_e2e", help="name of the JSONL file (without .jsonl)")
    ap.add_argument("--plot-only", default="", help="redraw plots from this JSONL file; measure nothing")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.plot_only:
        with open(args.plot_only) as f:
            recs = [json.loads(line) for line in f if line.strip()]
    else:
        recs = run(args)
        if not recs:
            return 1
        path = os.path.join(args.out, args.prefix + ".jsonl")
        with open(path, "w") as f:
            for r in recs:
                f.write(json.dumps(r) + "\n")
        print("records: %s (%d)" % (path, len(recs)))
    try:
        files = plot(recs, args.out)
        print("plots: " + ", ".join(files))
    except ImportError as e:
        print("plots skipped: %s" % e)
    print("\nsummary (TOPS, end to end):")
    print(summary(recs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
