#!/bin/bash
# Session 21 call e: on 5c6ca96 (.dev): cold first calls at hd 72/136/200/320 (3 rounds, the tiered
# default), then the e2e / kernel / real / small scoreboard groups.
set -u
O=/tmp/s21e; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s21e-nvcache
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
.dev/tools/sage2-info --version > $O/version.txt 2>&1
bash scripts/gpu_cold_jit.sh $O/jit .dev "72 136 200 320" 3 > $O/jit.log 2>&1
t "cold jit" $?
tar czf $OUT/s21e-jit.tgz -C /tmp s21e
bash bench/scoreboard_run.sh --out $O/sb --build .dev --modes e2e,kernel,real,small --budget-s 300 > $O/sb_run.log 2>&1
t "scoreboard" $?
tar czf $OUT/s21e.tgz -C /tmp s21e
grep -h '"mode"' $O/jit/first_call.jsonl | python3 -c "import sys,json; [print(r['head_dim'], r['s'], r.get('optimized_after_s')) for r in map(json.loads, sys.stdin)]"
