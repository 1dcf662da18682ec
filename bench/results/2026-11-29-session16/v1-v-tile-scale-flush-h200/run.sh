#!/usr/bin/env bash
# session 16, v: the attention kernel with a prototype per-(tile, channel) V-scale flush (.dev-proto,
# scratch; wrong numerics, timing only) against the final library (.dev): stage_profile attention_us,
# one round per run, three runs per build alternated.
cd "$(dirname "$0")/.."
O=/tmp/v; rm -rf $O; mkdir -p $O
export PYTHONPATH=python
S=b4h32-hd128-1k,b4h32-hd128-4k,b4h32-hd128-8k,b4h32-hd128-32k,flux-1024,b4h32-hd64-8k
for r in 1 2 3; do
  for v in base proto; do
    lib=.dev; [ $v = proto ] && lib=.dev-proto
    SAGE2_LIBRARY=$PWD/$lib/libsage2.so timeout 60 python3 bench/stage_profile.py --shapes $S --rounds 1 --calls 3 --out $O/stage_${v}_r$r.jsonl > $O/stage_${v}_r$r.log 2>&1
    echo "$v r$r rc=$?"
  done
done
tar czf $OUT/v.tgz -C /tmp v
python3 - <<'PY'
import json, statistics as st
def load(v):
    d = {}
    for r in (1, 2, 3):
        for l in open(f"/tmp/v/stage_{v}_r{r}.jsonl"):
            j = json.loads(l)
            if j.get("mode") == "stage_profile": d.setdefault(j["shape"], []).append(j["attention_us"])
    return d
b, p = load("base"), load("proto")
for s in b:
    mb, mp = st.median(b[s]), st.median(p[s])
    print("%-18s attention base %9.1f proto %9.1f  ratio %.3f   rounds %s / %s" % (s, mb, mp, mp / mb, [round(x,1) for x in b[s]], [round(x,1) for x in p[s]]))
PY
