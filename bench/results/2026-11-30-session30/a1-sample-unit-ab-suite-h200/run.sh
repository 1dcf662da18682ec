#!/usr/bin/env bash
# Session 30 call a1: the sampled statistics in units of 64 keys (issue 39): the stage A/B against
# main's quantize code (base = 6ff8d7a's bundle, whose quantize templates are main's), 3 rounds
# alternated, the quant shapes; then the whole C++ GPU suite on the new build (aa03523 + the change;
# it covers the merged kv-dst branch too), 4 shards.
set -u
O=/tmp/s30a1; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s30-nvcache
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
.dev/tools/sage2-info --version > $O/version.txt 2>&1
timeout 200 bash bench/stage_ab.sh $O/ab 3 base=.dev-base new=.dev > $O/ab.log 2>&1; t stage_ab $?
python3 bench/stage_compare.py "$O/ab/stage_base_r*.jsonl" "$O/ab/stage_new_r*.jsonl" > $O/compare.txt 2>&1; t compare $?
cp .scratch/s30/a1.sh $O/run.sh
tar czf $OUT/s30a1_ab.tgz -C /tmp s30a1
cat $O/compare.txt
timeout 340 bash scripts/gpu_run.sh $O/suite --bundle .dev --suite "" --shards 4 > $O/gpu_run.log 2>&1; t gpu_run $?
tail -12 $O/gpu_run.log
tar czf $OUT/s30a1.tgz -C /tmp s30a1
