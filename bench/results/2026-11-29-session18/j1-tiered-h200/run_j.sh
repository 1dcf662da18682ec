#!/usr/bin/env bash
# session 18 j: issue 40 on the GPU: the tiered-compile GPU test, then cold first calls with the tiered compile off and on.
cd "$(dirname "$0")/.."
O=/tmp/j; rm -rf $O; mkdir -p $O
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
start=$(date +%s)
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
timeout 200 .dev/tests/sage2_gpu_tests -tc='gpu tiered*' > $O/gpu_tiered.log 2>&1
echo "tiered test rc=$? t=$(( $(date +%s) - start ))"; tail -4 $O/gpu_tiered.log
SAGE2_TIERED_COMPILE=0 timeout 120 bash scripts/gpu_cold_jit.sh $O/off .dev "72 136 200 320" 3 > $O/off.log 2>&1
echo "off rc=$? t=$(( $(date +%s) - start ))"
SAGE2_TIERED_COMPILE=1 timeout 120 bash scripts/gpu_cold_jit.sh $O/on .dev "72 136 200 320" 3 > $O/on.log 2>&1
echo "on rc=$? t=$(( $(date +%s) - start ))"
python3 - <<'PY'
import json
for m in ("off","on"):
    try:
        for l in open(f"/tmp/j/{m}/first_call.jsonl"):
            r=json.loads(l); print(m, r["head_dim"], round(r["s"],3), r["first_call_tier"], r["optimized_after_s"], [round(x,3) for x in r["s_rounds"]])
    except Exception as e: print(m, "no records", e)
PY
tar czf $OUT/j.tgz -C /tmp j
