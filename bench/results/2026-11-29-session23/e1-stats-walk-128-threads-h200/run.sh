#!/bin/bash
# Session 23 call e1: the sampled statistics walk at 128 threads per CTA (branch s23-stats-threads,
# .dev): SAGE2_EXP_STATS_T=128 with 8 or 6 CTAs per SM against the default (256 threads, 4 CTAs),
# the quant group's stage profile, 3 rounds per variant alternated, one build.
set -u
O=/tmp/s23e; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s23e-nvcache PYTHONPATH=$PWD/python SAGE2_TIERED_COMPILE=0 SAGE2_LIBRARY=$PWD/.dev/libsage2.so
.dev/tools/sage2-info --version > $O/version.txt 2>&1
for r in 1 2 3; do
  for v in def t128c8 t128c6; do
    case $v in def) e=();; t128c8) e=(SAGE2_EXP_STATS_T=128 SAGE2_EXP_STATS_CTAS=8);; t128c6) e=(SAGE2_EXP_STATS_T=128 SAGE2_EXP_STATS_CTAS=6);; esac
    env "${e[@]}" timeout 100 python3 bench/stage_profile.py --shapes quant --rounds 1 --calls 3 --out $O/stage_${v}_r$r.jsonl > $O/stage_${v}_r$r.log 2>&1
    echo "[$(date +%T)] $v r$r rc=$?" | tee -a $O/steps.txt
  done
done
for v in t128c8 t128c6; do python3 bench/stage_compare.py "$O/stage_def_r*.jsonl" "$O/stage_${v}_r*.jsonl" > $O/compare_$v.txt 2>&1; done
tar czf $OUT/s23e.tgz -C /tmp s23e
cat $O/compare_*.txt
