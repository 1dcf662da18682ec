#!/usr/bin/env bash
# session 18 d: the direct-path first tier: the tiered GPU tests, then cold first calls (fresh compute cache per process), off and on.
cd "$(dirname "$0")/.."
O=/tmp/d; rm -rf $O; mkdir -p $O
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CUDA_CACHE_PATH=/tmp/d-cc
start=$(date +%s)
timeout 200 .dev/tests/sage2_gpu_tests -tc='gpu tiered*' > $O/gpu_tiered.log 2>&1
echo "tiered test rc=$? t=$(( $(date +%s) - start ))"; tail -3 $O/gpu_tiered.log; grep -h "MESSAGE" $O/gpu_tiered.log
for m in 1 0; do
  SAGE2_TIERED_COMPILE=$m timeout 150 bash scripts/gpu_cold_jit.sh $O/jit-tiered$m .dev "72 136 200 320" 3 > $O/jit-tiered$m.log 2>&1
  echo "jit tiered=$m rc=$? t=$(( $(date +%s) - start ))"
done
SHAPE="1 24 4608" SAGE2_TIERED_COMPILE=1 timeout 60 bash scripts/gpu_cold_jit.sh $O/jit-flux-tiered1 .dev "72 136" 3 > $O/jit-flux-tiered1.log 2>&1
echo "jit flux tiered=1 rc=$? t=$(( $(date +%s) - start ))"
python3 - <<'PY'
import json, glob
for f in sorted(glob.glob("/tmp/d/jit-*/first_call.jsonl")):
    for l in open(f):
        r = json.loads(l)
        print(f.split("/")[3], r["head_dim"], r["batch"], r["heads"], r["seq_len"], round(r["s"], 3), r["first_call_tier"], r["optimized_after_s"], [round(x, 3) for x in r["s_rounds"]])
PY
tar czf $OUT/d.tgz -C /tmp d
