#!/usr/bin/env python3
"""d1: host_graph.py's medians per shape, base (4ef8d7b) against new (the branch), sage2 and the cuDNN control."""
import collections, json, os, statistics
d = collections.defaultdict(list)
here = os.path.dirname(os.path.abspath(__file__))
for n in ("base", "new"):
    for r in (1, 2):
        for l in open(os.path.join(here, f"hg_{n}_r{r}.jsonl")):
            x = json.loads(l)
            if "eager_us" in x:
                d[(x["shape"], x["method"], n)].append((x["eager_us"], x["graph_us"]))
print(f"{'shape':10s} {'sage2 eager base/new':>22s} {'ratio':>6s} {'sage2 graph base/new':>22s} {'cuDNN eager base/new':>22s} {'ratio':>6s}")
for s in ["hd128-1k", "hd128c-2k", "hd64-2k", "qwen", "bert", "flux"]:
    med = lambda m, n, i: statistics.median(t[i] for t in d[(s, m, n)])
    eb, en, gb, gn = med("sage2", "base", 0), med("sage2", "new", 0), med("sage2", "base", 1), med("sage2", "new", 1)
    cb, cn = med("cudnn", "base", 0), med("cudnn", "new", 0)
    print(f"{s:10s} {eb:10.1f} / {en:8.1f}  {eb / en:6.3f} {gb:10.1f} / {gn:8.1f}  {cb:10.1f} / {cn:8.1f}  {cb / cn:6.3f}")
