#!/usr/bin/env bash
# session 18 c5: the cold first calls again, every process with a fresh driver/NVRTC compute cache.
cd "$(dirname "$0")/.."
O=/tmp/c5; rm -rf $O; mkdir -p $O
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
start=$(date +%s)
for m in 0 1; do
  SAGE2_TIERED_COMPILE=$m timeout 120 bash scripts/gpu_cold_jit.sh $O/jit-tiered$m .dev "72 136 200 320" 3 > $O/jit-tiered$m.log 2>&1
  echo "jit tiered=$m rc=$? t=$(( $(date +%s) - start ))"
  SHAPE="1 24 4608" SAGE2_TIERED_COMPILE=$m timeout 60 bash scripts/gpu_cold_jit.sh $O/jit-flux-tiered$m .dev "72 136" 3 > $O/jit-flux-tiered$m.log 2>&1
  echo "jit flux tiered=$m rc=$? t=$(( $(date +%s) - start ))"
done
python3 - <<'PY'
import json, glob
for f in sorted(glob.glob("/tmp/c5/jit-*/first_call.jsonl")):
    for l in open(f):
        r = json.loads(l)
        print(f.split("/")[3], r["head_dim"], r["batch"], r["heads"], r["seq_len"], round(r["s"], 3), r["first_call_tier"], r["optimized_after_s"], [round(x, 3) for x in r["s_rounds"]])
PY
tar czf $OUT/c5.tgz -C /tmp c5
