#!/bin/bash
# Session 23 call f1: the final code (.dev: the carveout + the 128-thread sampled walk) against
# 9e90105 (.dev-base, session 22's main): the quant group's stage profile, 3 rounds per build
# alternated (the new rounds merged are the quant records), then the whole C++ GPU suite (4 shards).
set -u
O=/tmp/s23f; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s23f-nvcache PYTHONPATH=$PWD/python SAGE2_TIERED_COMPILE=0
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
bash bench/stage_ab.sh $O/ab 3 new=.dev base=.dev-base
python3 bench/stage_compare.py "$O/ab/stage_base_r*.jsonl" "$O/ab/stage_new_r*.jsonl" > $O/compare_new.txt 2>&1
tar czf $OUT/s23f-ab.tgz -C /tmp s23f
bash scripts/gpu_run.sh $O/suite --bundle .dev --suite "" --shards 4 > $O/gpu_run.log 2>&1; t "suite" $?
tar czf $OUT/s23f.tgz -C /tmp s23f
cat $O/compare_new.txt
tail -6 $O/gpu_run.log
