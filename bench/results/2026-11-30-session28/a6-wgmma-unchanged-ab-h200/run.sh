#!/usr/bin/env bash
# wgmma family, heuristic tile: base (.dev-base) vs new (.dev), 3 rounds alternated (sage2-autotune --no-db).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/wg"
for r in 1 2 3; do for tag in base new; do
  dir=.dev; [ $tag = base ] && dir=.dev-base
  SAGE2_CACHE_DIR=/tmp/wg-$tag timeout 100 $dir/tools/sage2-autotune --device 0 --no-db --no-progress --head-dims 64,128 \
    --dtypes f16 --causal none,top-left --seq-lens 1024,8192 --tiles 64x128x4x2 --reps 20 --report "$OUT/wg/${tag}_r$r.json" > "$OUT/wg/${tag}_r$r.txt" 2>&1 || echo "fail $tag $r"
done; done
python3 - "$OUT/wg" <<'PY'
import json,glob,sys,statistics as st,collections
d=collections.defaultdict(list)
for f in glob.glob(sys.argv[1]+'/*.json'):
    tag=f.split('/')[-1].split('_')[0]
    for r in json.load(open(f))['results']:
        d[(r['key'].split('|')[1],r['key'].split('|')[2],r['seq_len'],tag)].append(r['heuristic']['ms'])
for k in sorted({k[:3] for k in d}):
    b=st.median(d[k+('base',)]); n=st.median(d[k+('new',)]); print(k,'base %.4f new %.4f x%.3f'%(b,n,b/n))
PY
