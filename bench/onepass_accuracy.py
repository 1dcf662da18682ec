#!/usr/bin/env python3
"""The accuracy study of the one-pass contract amendment (DESIGN.md "the amendment that one pass
over K and V may use"; project issue 30 item 2) on the CPU emulation.

Runs `sage2-accuracy --only onepass --json -` over data kinds x head dims x causal x seeds and
prints markdown: per (configuration, data kind) the mean rel-L1 / cos against exact fp64 attention
of today's contract and of the amended one, the ratio of the mean rel-L1s and the worst per-cell
ratio. The bar: every ratio <= 1.02.

  bench/onepass_accuracy.py --tool build/tools/sage2-accuracy [--q-len 2048] [--seeds 1,2,3]
                            [--head-dims 64,128] [--heads 2] [--threads 2] [--json out.json]
"""
import argparse
import json
import subprocess
import sys
from collections import defaultdict

KINDS = ["gaussian", "activation", "student-t"]
CAUSAL = ["none", "top-left"]
BAR = 1.02


def run(tool, kind, d, causal, seed, a):
    cmd = [tool, "--only", "onepass", "--inputs", kind, "--head-dim", str(d), "--causal", causal,
           "--seed", str(seed), "--q-len", str(a.q_len), "--heads", str(a.heads),
           "--threads", str(a.threads), "--sample-tiles", str(a.sample_tiles), "--sample-unit", str(a.sample_unit), "--v-headroom", str(a.v_headroom),
           "--json", "-"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return " ".join(cmd[1:]), json.loads(out)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tool", default="build/tools/sage2-accuracy")
    p.add_argument("--q-len", type=int, default=2048)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--head-dims", default="64,128")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--sample-tiles", type=int, default=4, help="the sampled rows' KV tiles (sample_statistics)")
    p.add_argument("--sample-unit", type=int, default=64, help="the sampled rows' keys per unit (0: the KV tile)")
    p.add_argument("--v-headroom", type=float, default=16.0, help="the sampled rows' V headroom")
    p.add_argument("--kinds", default=",".join(KINDS))
    p.add_argument("--causal", default=",".join(CAUSAL))
    p.add_argument("--json", help="also write every cell here")
    a = p.parse_args()
    seeds = [int(s) for s in a.seeds.split(",")]
    dims = [int(s) for s in a.head_dims.split(",")]

    cells = []   # one per (kind, d, causal, seed, config)
    for kind in a.kinds.split(","):
        for d in dims:
            for causal in a.causal.split(","):
                for seed in seeds:
                    cmd, j = run(a.tool, kind, d, causal, seed, a)
                    print(f"ran sage2-accuracy {cmd}", file=sys.stderr)
                    rows = {r["name"]: r for r in j["results"]}
                    for r in j["results"]:
                        if not r.get("baseline"):
                            continue
                        t = rows[r["baseline"]]
                        cells.append({"kind": kind, "head_dim": d, "causal": causal, "seed": seed,
                                      "config": r["name"],
                                      "l1_today": t["rel_l1"], "l1_onepass": r["rel_l1"],
                                      "cos_today": t["cos_sim"], "cos_onepass": r["cos_sim"],
                                      "ratio": r["rel_l1_vs_baseline"]})
    if a.json:
        with open(a.json, "w") as f:
            json.dump(cells, f, indent=1)

    groups = defaultdict(list)
    for c in cells:
        groups[(c["config"], c["kind"])].append(c)
    print(f"N = {a.q_len}, heads = {a.heads}, head dims {dims}, causal {a.causal}, seeds {seeds}: "
          f"{len(cells) // max(1, len(groups))} cells per row; 13-bit accumulator; sampled rows: "
          f"{a.sample_tiles} units of {a.sample_unit or 'bk'} keys, V headroom {a.v_headroom:g}\n")
    print("| configuration | data | rel-L1 today | rel-L1 one-pass | ratio of means | worst cell ratio "
          "| cos today | cos one-pass |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    worst_all = 0.0
    for (config, kind), cs in groups.items():
        n = len(cs)
        l1t = sum(c["l1_today"] for c in cs) / n
        l1o = sum(c["l1_onepass"] for c in cs) / n
        cost = sum(c["cos_today"] for c in cs) / n
        coso = sum(c["cos_onepass"] for c in cs) / n
        worst = max(c["ratio"] for c in cs)
        worst_all = max(worst_all, worst)
        print(f"| {config} | {kind} | {l1t:.5f} | {l1o:.5f} | {l1o / l1t:.4f} | {worst:.4f} "
              f"| {cost:.6f} | {coso:.6f} |")
    verdict = "passes" if worst_all <= BAR else "fails"
    print(f"\nworst per-cell ratio {worst_all:.4f}: the amendment {verdict} the bar (<= {BAR})")


if __name__ == "__main__":
    main()
