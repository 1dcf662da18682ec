#!/usr/bin/env bash
# Session 20 d: the tiered compile on by default — the whole C++ GPU suite (its main sets
# SAGE2_TIERED_COMPILE=0 unless set; the tiered tests set it per Context), then the cold first
# calls at hd 72 / 136 / 200 / 320 with the library's default (SAGE2_TIERED_COMPILE unset).
cd "$(dirname "$0")/.."
O=/tmp/s20d; rm -rf $O; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s20d-cc LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
unset SAGE2_TIERED_COMPILE
start=$(date +%s)
.dev/tools/sage2-info --version > $O/version.txt 2>&1
timeout 400 bash scripts/gpu_run.sh $O/suite --bundle .dev --suite "" --shards 4 > $O/gpu_run.log 2>&1
echo "suite rc=$? t=$(( $(date +%s) - start ))" | tee -a $O/steps.txt; tail -6 $O/gpu_run.log
timeout 150 bash scripts/gpu_cold_jit.sh $O/jit .dev "72 136 200 320" 3 > $O/jit.log 2>&1
echo "jit rc=$? t=$(( $(date +%s) - start ))" | tee -a $O/steps.txt
python3 - <<'PY'
import json
for l in open("/tmp/s20d/jit/first_call.jsonl"):
    r = json.loads(l)
    print(r["head_dim"], round(r["s"], 3), r.get("first_call_tier"), r.get("optimized_after_s"), [round(x, 3) for x in r["s_rounds"]])
PY
tar czf $OUT/s20d.tgz -C /tmp s20d
