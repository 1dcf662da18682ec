"""Median TOPS over rounds per cell and tag (base / new) of a ptx_ab.jsonl, the new/base ratio, and per arch min / median / max:
   python3 ab_summary.py ptx_ab.jsonl"""
import json, statistics, collections, sys
rs=[json.loads(l) for l in open(sys.argv[1])]
d=collections.defaultdict(list)
for r in rs: d[(r['arch'],r['head_dim'],r['causal'],r['seq_len'],r['pv_accum'],r['tag'])].append(r['tops'])
rat=[]
for k in sorted(set(k[:5] for k in d)):
    b=statistics.median(d[k+('base',)]); n=statistics.median(d[k+('new',)])
    rat.append((k,n/b)); print(k, b, n, round(n/b,3), len(d[k+('base',)]))
for a in ('sm_80','sm_89'):
    v=[r for k,r in rat if k[0]==a]; print(a, round(min(v),3), round(statistics.median(v),3), round(max(v),3))
