#!/bin/bash
# Session 21 call c: quantize_v's instruction diet (.dev, 5c6ca96) against 9040ebd (.dev-base): the
# quant group's stage profile, 3 rounds per build alternated; then the whole C++ GPU suite (4 shards).
set -u
O=/tmp/s21c; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s21c-nvcache PYTHONPATH=$PWD/python
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
for d in .dev .dev-base; do $d/tools/sage2-info --version >> $O/version.txt 2>&1; done
for r in 1 2 3; do
  for v in new base; do
    lib=.dev; [ $v = base ] && lib=.dev-base
    SAGE2_LIBRARY=$PWD/$lib/libsage2.so timeout 100 python3 bench/stage_profile.py --shapes quant --rounds 1 --calls 3 --out $O/stage_${v}_r$r.jsonl > $O/stage_${v}_r$r.log 2>&1
    t "stage $v r$r" $?
  done
done
tar czf $OUT/s21c-ab.tgz -C /tmp s21c
bash scripts/gpu_run.sh $O/suite --bundle .dev --suite "" --shards 4 > $O/gpu_run.log 2>&1
t "suite" $?
tar czf $OUT/s21c.tgz -C /tmp s21c
tail -12 $O/gpu_run.log
