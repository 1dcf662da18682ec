#!/usr/bin/env python3
"""Per-shape comparison of two builds' bench/stage_profile.py rounds (run alternated in one device
call): the median over rounds of the stage's exposed µs ("quant_us") and of each quantize kernel's
span, base against new, and the base/new ratio (> 1: new is faster).

    python3 bench/stage_compare.py BASE_GLOB NEW_GLOB [--kernels quantize_v,quantize_k,channel_stats]
e.g. python3 bench/stage_compare.py 'OUT/stage_base_r*.jsonl' 'OUT/stage_new_r*.jsonl'"""
import argparse
import glob
import json
import statistics


def rounds(pattern):
    """shape -> list of (quant_us, {kernel name without sage2_: span}) over the files' stage_profile records."""
    per = {}
    files = sorted(glob.glob(pattern))
    if not files:
        raise SystemExit("stage_compare: no file matches " + pattern)
    for path in files:
        for line in open(path):
            r = json.loads(line)
            if r.get("mode") != "stage_profile":
                continue
            spans = {k["name"].replace("sage2_", "", 1): k["span"] for k in r["kernels"]}
            per.setdefault(r["shape"], []).append((r["quant_us"], spans))
    return per


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("new")
    ap.add_argument("--kernels", default="quantize_v,quantize_k,channel_stats")
    a = ap.parse_args()
    base, new = rounds(a.base), rounds(a.new)
    kernels = [k for k in a.kernels.split(",") if k]
    med = lambda xs: statistics.median(xs) if xs else float("nan")
    head = "%-26s %17s" % ("shape", "stage base/new") + "".join(" %22s" % (k + " base/new") for k in kernels)
    print(head + "  stage ratio")
    for shape in base:
        if shape not in new:
            continue
        b, n = base[shape], new[shape]
        sb, sn = med([x[0] for x in b]), med([x[0] for x in n])
        cols = ""
        for k in kernels:
            kb = med([x[1][k] for x in b if k in x[1]])
            kn = med([x[1][k] for x in n if k in x[1]])
            cols += " %10.1f / %9.1f" % (kb, kn)
        print("%-26s %8.1f / %6.1f%s  %.3f  (%d / %d rounds)" % (shape, sb, sn, cols, sb / sn if sn else 0.0, len(b), len(n)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
