#!/usr/bin/env bash
# Session 30 call b1: K and V of the sampled split stage in one launch (QuantOp::SplitKV, 19bb256) against
# 788f7b2 (the 64-key sample unit), 3 rounds alternated, the quant shapes; then the whole C++ GPU
# suite on the new build, 4 shards.
set -u
O=/tmp/s30b1; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s30-nvcache
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
.dev/tools/sage2-info --version > $O/version.txt 2>&1
timeout 200 bash bench/stage_ab.sh $O/ab 3 base=.dev-base new=.dev > $O/ab.log 2>&1; t stage_ab $?
python3 bench/stage_compare.py "$O/ab/stage_base_r*.jsonl" "$O/ab/stage_new_r*.jsonl" > $O/compare.txt 2>&1; t compare $?
cp .scratch/s30/b1.sh $O/run.sh
tar czf $OUT/s30b1_ab.tgz -C /tmp s30b1
cat $O/compare.txt
timeout 340 bash scripts/gpu_run.sh $O/suite --bundle .dev --suite "" --shards 4 > $O/gpu_run.log 2>&1; t gpu_run $?
tail -12 $O/gpu_run.log
tar czf $OUT/s30b1.tgz -C /tmp s30b1
