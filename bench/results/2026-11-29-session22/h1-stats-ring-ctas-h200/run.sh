#!/bin/bash
# Session 22 call h: the sampled channel_stats with a one-tile ring at 3/4/5 CTAs per SM
# (.dev = branch s22-stats-ctas, SAGE2_EXP_STATS_CTAS) against e4d3e9b (.dev-base, code 7fa5b09),
# 3 rounds alternated.
set -u
O=/tmp/s22h; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s22h-nvcache PYTHONPATH=$PWD/python SAGE2_TIERED_COMPILE=0
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
for d in .dev .dev-base; do $d/tools/sage2-info --version >> $O/version.txt 2>&1; done
for r in 1 2 3; do
  for v in base c3 c4 c5; do
    lib=.dev; [ $v = base ] && lib=.dev-base
    SAGE2_EXP_STATS_CTAS=${v#c} SAGE2_LIBRARY=$PWD/$lib/libsage2.so timeout 100 python3 bench/stage_profile.py --shapes quant --rounds 1 --calls 3 --out $O/stage_${v}_r$r.jsonl > $O/stage_${v}_r$r.log 2>&1
    t "stage $v r$r" $?
  done
done
tar czf $OUT/s22h-ab.tgz -C /tmp s22h
tar czf $OUT/s22h.tgz -C /tmp s22h
