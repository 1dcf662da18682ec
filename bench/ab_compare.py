#!/usr/bin/env python3
"""Per-cell comparison of scripts/ab_attention.sh output: for every (mode, head dim, causal, N) the
median TOPS of each side over its rounds, the spread of each side (max/min over rounds) and the
after/before ratio.   python3 bench/ab_compare.py OUT"""
import glob
import json
import os
import statistics
import sys


def main(out):
    cells = {}
    for path in sorted(glob.glob(os.path.join(out, "*_*.jsonl"))):
        side = os.path.basename(path).split("_")[0]
        for line in open(path):
            r = json.loads(line)
            if "tops" not in r:
                continue
            key = (r["mode"], r["head_dim"], r["causal"], r["seq_len"])
            cells.setdefault(key, {}).setdefault(side, []).append(r["tops"])
    print("%-7s %4s %6s %6s | %9s %6s | %9s %6s | %6s" % ("mode", "hd", "causal", "N", "before", "spread",
                                                           "after", "spread", "ratio"))
    worst = 1.0
    for key in sorted(cells):
        c = cells[key]
        if "before" not in c or "after" not in c:
            continue
        b, a = statistics.median(c["before"]), statistics.median(c["after"])
        sb, sa = max(c["before"]) / min(c["before"]), max(c["after"]) / min(c["after"])
        ratio = a / b
        if key[0] == "kernel":
            worst = min(worst, ratio)
        print("%-7s %4d %6s %6d | %9.1f %6.3f | %9.1f %6.3f | %6.3f" % (*key, b, sb, a, sa, ratio))
    print("lowest kernel after/before ratio: %.3f" % worst)


if __name__ == "__main__":
    main(sys.argv[1])
