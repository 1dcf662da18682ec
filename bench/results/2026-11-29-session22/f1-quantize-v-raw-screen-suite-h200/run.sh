#!/bin/bash
# Session 22 call f: quantize_v's raw-input screen (.dev, a942fc2) against d7efb1d (.dev-base, the
# code of 5c6ca96): the quant group's stage profile, 3 rounds per build alternated; then the whole
# C++ GPU suite (4 shards, base seed 6767001234800297631: session 21's failing wgmma seed) beside
# the two other failing attention-vs-emulation seeds run alone.
set -u
O=/tmp/s22f; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s22f-nvcache PYTHONPATH=$PWD/python
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
for d in .dev .dev-base; do $d/tools/sage2-info --version >> $O/version.txt 2>&1; done
for r in 1 2 3; do
  for v in new base; do
    lib=.dev; [ $v = base ] && lib=.dev-base
    SAGE2_LIBRARY=$PWD/$lib/libsage2.so timeout 100 python3 bench/stage_profile.py --shapes quant --rounds 1 --calls 3 --out $O/stage_${v}_r$r.jsonl > $O/stage_${v}_r$r.log 2>&1
    t "stage $v r$r" $?
  done
done
tar czf $OUT/s22f-ab.tgz -C /tmp s22f
(SAGE2_TIERED_COMPILE=0 SAGE2_TEST_SEED=13255569623320757087 timeout 420 .dev/tests/sage2_gpu_tests -tc='gpu attention: quantize + ΔS + mma*' > $O/mma_seed1325.log 2>&1; t "mma seed 13255569623320757087" $?) &
(SAGE2_TIERED_COMPILE=0 SAGE2_TEST_SEED=8511178200839985487 timeout 420 .dev/tests/sage2_gpu_tests -tc='gpu wgmma: quantize + ΔS + wgmma*' > $O/wgmma_seed8511.log 2>&1; t "wgmma seed 8511178200839985487" $?) &
SAGE2_TEST_SEED=6767001234800297631 bash scripts/gpu_run.sh $O/suite --bundle .dev --suite "" --shards 4 > $O/gpu_run.log 2>&1
t "suite" $?
wait
tar czf $OUT/s22f.tgz -C /tmp s22f
tail -12 $O/gpu_run.log
