#!/usr/bin/env bash
# Session 31 call a4: bd4a599 (channel_stats in clusters at 9 CTAs per SM, so that B 4 x H 32's
# 256 clusters are active at once) against edbfadd (8 per SM): the stage A/B, 3 rounds alternated;
# (the GPU suite in the next call, if it is kept).
set -u
O=/tmp/s31a4; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s31-nvcache
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
.dev/tools/sage2-info --version > $O/version.txt 2>&1; .dev-base/tools/sage2-info --version >> $O/version.txt 2>&1
cp .scratch/s31/a4.sh $O/run.sh
timeout 190 bash bench/stage_ab.sh $O/ab 3 base=.dev-base new=.dev > $O/ab.log 2>&1; t stage_ab $?
python3 bench/stage_compare.py "$O/ab/stage_base_r*.jsonl" "$O/ab/stage_new_r*.jsonl" > $O/compare.txt 2>&1; t compare $?
cat $O/compare.txt
tar czf $OUT/s31a4_ab.tgz -C /tmp s31a4
