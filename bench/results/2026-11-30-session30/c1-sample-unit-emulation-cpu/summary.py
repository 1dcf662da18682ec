#!/usr/bin/env python3
"""Per unit and N: the sampled rows' mean rel-L1 over the all-keys statistics' (ratio of means per
(configuration, data kind)), its range, and the worst cell. Reads acc_u{0,64,32}_n{1024,2048}.json, or .cells.xz (the same JSON, xz: named so that the scoreboard's *.json* glob skips it)."""
import collections, json, lzma, os, sys
d = os.path.dirname(os.path.abspath(__file__))
def load(u, n):
    p = os.path.join(d, f"acc_u{u}_n{n}")
    return json.load(lzma.open(p + ".cells.xz")) if os.path.exists(p + ".cells.xz") else json.load(open(p + ".json"))
for n in (1024, 2048):
    for u in (0, 64, 32):
        g = collections.defaultdict(list)
        for c in load(u, n):
            if c["config"].endswith("sampled"): g[(c["config"], c["kind"])].append(c)
        for fam in ("mma", "wgmma"):
            rows = [(sum(c["l1_onepass"] for c in cs) / sum(c["l1_today"] for c in cs), max(c["ratio"] for c in cs))
                    for (cfg, _), cs in g.items() if cfg.startswith(fam + " ")]
            print(f"N {n} unit {u or 'bk':>2} {fam:5s}: ratio of means {min(r[0] for r in rows):.4f}-{max(r[0] for r in rows):.4f}, "
                  f"worst cell {max(r[1] for r in rows):.4f}")
