#!/bin/bash
# Session 22 call i: the records of 70a4674 (.dev): the quant group's stage profile (3 rounds),
# cold first calls at hd 72/136/200/320 (3 rounds, the tiered default), then the e2e / kernel /
# real / small scoreboard groups.
set -u
O=/tmp/s22i; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s22i-nvcache PYTHONPATH=$PWD/python
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
.dev/tools/sage2-info --version > $O/version.txt 2>&1
for r in 1 2 3; do
  SAGE2_TIERED_COMPILE=0 SAGE2_LIBRARY=$PWD/.dev/libsage2.so timeout 100 python3 bench/stage_profile.py --shapes quant --rounds 1 --calls 3 --out $O/stage_new_r$r.jsonl > $O/stage_new_r$r.log 2>&1
  t "stage r$r" $?
done
python3 bench/stage_profile.py --merge $O/stage_new_r1.jsonl $O/stage_new_r2.jsonl $O/stage_new_r3.jsonl --out $O/quant_final.jsonl > $O/merge.log 2>&1
tar czf $OUT/s22i-quant.tgz -C /tmp s22i
bash scripts/gpu_cold_jit.sh $O/jit .dev "72 136 200 320" 3 > $O/jit.log 2>&1
t "cold jit" $?
tar czf $OUT/s22i-jit.tgz -C /tmp s22i
bash bench/scoreboard_run.sh --out $O/sb --build .dev --modes e2e,kernel,real,small --budget-s 300 > $O/sb_run.log 2>&1
t "scoreboard" $?
tar czf $OUT/s22i.tgz -C /tmp s22i
