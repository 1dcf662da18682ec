#!/usr/bin/env bash
# Session 31 call a1: main 05d8507 (the merged s30-stats-clusters branch: the sampled statistics
# combined in a cluster on sm_90a, no memset) against 4ef8d7b (the library code before the merge):
# the stage A/B, 3 rounds alternated; the eager e2e through host_graph.py, 3 rounds alternated;
# then the whole C++ GPU suite on 05d8507, 4 shards.
set -u
O=/tmp/s31a1; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s31-nvcache
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
.dev/tools/sage2-info --version > $O/version.txt 2>&1; .dev-base/tools/sage2-info --version >> $O/version.txt 2>&1
cp .scratch/s31/a1.sh $O/run.sh
timeout 190 bash bench/stage_ab.sh $O/ab 3 base=.dev-base new=.dev > $O/ab.log 2>&1; t stage_ab $?
python3 bench/stage_compare.py "$O/ab/stage_base_r*.jsonl" "$O/ab/stage_new_r*.jsonl" > $O/compare.txt 2>&1; t compare $?
cat $O/compare.txt
tar czf $OUT/s31a1_ab.tgz -C /tmp s31a1
for r in 1 2 3; do
  for n in new base; do
    b=.dev; [[ $n == base ]] && b=.dev-base
    SAGE2_TIERED_COMPILE=0 PYTHONPATH=$PWD/python SAGE2_LIBRARY=$PWD/$b/libsage2.so timeout 40 python3 .scratch/s31/host_graph.py $O/hg_${n}_r$r.jsonl > $O/hg_${n}_r$r.log 2>&1; t "host_graph $n r$r" $?
  done
done
tar czf $OUT/s31a1_hg.tgz -C /tmp s31a1
timeout 320 bash scripts/gpu_run.sh $O/suite --bundle .dev --suite "" --shards 4 > $O/gpu_run.log 2>&1; t gpu_run $?
tail -12 $O/gpu_run.log
tar czf $OUT/s31a1.tgz -C /tmp s31a1
# .scratch/s31/host_graph.py is session 30's script unchanged:
# bench/results/2026-11-30-session30/a2-host-share-graph-h200/host_graph.py
