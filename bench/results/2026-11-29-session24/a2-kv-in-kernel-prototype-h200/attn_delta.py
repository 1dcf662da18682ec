"""Attention kernel and stage per shape, two builds of bench/stage_ab.sh: python3 attn_delta.py DIR BASE NEW"""
import json, glob, sys, statistics as st
d, bn, nn = sys.argv[1:4]
def load(n):
    r = {}
    for f in sorted(glob.glob(d + '/stage_%s_r*.jsonl' % n)):
        for l in open(f):
            x = json.loads(l)
            if x.get('mode') != 'stage_profile': continue
            r.setdefault(x['shape'], []).append(x)
    return r
b, e = load(bn), load(nn)
kv = lambda x: sum(k['exposed'] for k in x['kernels'] if k['name'] in ('sage2_quantize_k', 'sage2_quantize_v'))
print('%-24s %9s %9s %8s | %8s %8s | %8s %8s %8s' % ('shape', 'attn_' + bn, 'attn_' + nn, 'delta', 'KV_' + bn, 'stage_' + bn, 'call_' + bn, 'call_' + nn, 'est_call'))
for s in b:
    m = lambda L, f: st.median(f(x) for x in L)
    ab, ae = m(b[s], lambda x: x['attention_us']), m(e[s], lambda x: x['attention_us'])
    k = m(b[s], kv); q = m(b[s], lambda x: x['quant_us'])
    cb, ce = m(b[s], lambda x: x['call_us']), m(e[s], lambda x: x['call_us'])
    print('%-24s %9.1f %9.1f %8.1f | %8.1f %8.1f | %8.1f %8.1f %8.1f' % (s, ab, ae, ae - ab, k, q, cb, ce, cb - k + (ae - ab)))
