#!/bin/bash
# Session 23 call d1: the split quantize launches' planned shared carveout (.dev, branch
# s23-carveout) against main 9e90105 (.dev-base): the quant group's stage profile, 3 rounds per build
# alternated; the varlen stage's kernels (non-sampled split, 64 KB ring) and stage_profile with
# SAGE2_QUANT_PATH=split for both builds, alternated; then the whole C++ GPU suite on .dev (4 shards).
set -u
O=/tmp/s23d; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s23d-nvcache PYTHONPATH=$PWD/python SAGE2_TIERED_COMPILE=0
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
bash bench/stage_ab.sh $O/ab 3 new=.dev base=.dev-base newsplit=.dev:SAGE2_QUANT_PATH=split basesplit=.dev-base:SAGE2_QUANT_PATH=split
python3 bench/stage_compare.py "$O/ab/stage_base_r*.jsonl" "$O/ab/stage_new_r*.jsonl" > $O/compare_new.txt 2>&1
python3 bench/stage_compare.py "$O/ab/stage_basesplit_r*.jsonl" "$O/ab/stage_newsplit_r*.jsonl" > $O/compare_split.txt 2>&1
for r in 1 2; do for v in new base; do
  lib=.dev; [ $v = base ] && lib=.dev-base
  SAGE2_LIBRARY=$PWD/$lib/libsage2.so timeout 60 python3 bench/varlen_profile.py --n 4096 --b 4 --causal 1 > $O/varlen_${v}_r$r.log 2>&1; t "varlen $v r$r" $?
done; done
tar czf $OUT/s23d-ab.tgz -C /tmp s23d
bash scripts/gpu_run.sh $O/suite --bundle .dev --suite "" --shards 4 > $O/gpu_run.log 2>&1; t "suite" $?
tar czf $OUT/s23d.tgz -C /tmp s23d
cat $O/compare_new.txt $O/compare_split.txt
grep -h -A3 "kernel" $O/varlen_*_r2.log | head -30
tail -15 $O/gpu_run.log
