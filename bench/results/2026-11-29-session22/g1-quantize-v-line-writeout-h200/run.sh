#!/bin/bash
# Session 22 call g: quantize_v's line-wide write-out (.dev, 7fa5b09) against 2373372 (.dev-base,
# the raw screen): the quant group's stage profile, 3 rounds per build alternated; then the
# reduced quantize GPU tests beside the attention-vs-emulation tests at the three failing seeds
# (with the P̂ boundary slack).
set -u
O=/tmp/s22g; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s22g-nvcache PYTHONPATH=$PWD/python SAGE2_TIERED_COMPILE=0
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
for d in .dev .dev-base; do $d/tools/sage2-info --version >> $O/version.txt 2>&1; done
for r in 1 2 3; do
  for v in new base; do
    lib=.dev; [ $v = base ] && lib=.dev-base
    SAGE2_LIBRARY=$PWD/$lib/libsage2.so timeout 100 python3 bench/stage_profile.py --shapes quant --rounds 1 --calls 3 --out $O/stage_${v}_r$r.jsonl > $O/stage_${v}_r$r.log 2>&1
    t "stage $v r$r" $?
  done
done
tar czf $OUT/s22g-ab.tgz -C /tmp s22g
T=.dev/tests/sage2_gpu_tests
(SAGE2_TEST_SEED=13255569623320757087 timeout 300 $T -tc='gpu attention: quantize + ΔS + mma*' > $O/mma_seed1325.log 2>&1; t "mma seed 13255569623320757087" $?) &
(SAGE2_TEST_SEED=8511178200839985487 timeout 300 $T -tc='gpu wgmma: quantize + ΔS + wgmma*' > $O/wgmma_seed8511.log 2>&1; t "wgmma seed 8511178200839985487" $?) &
(SAGE2_TEST_SEED=6767001234800297631 timeout 300 $T -tc='gpu wgmma: quantize + ΔS + wgmma*' > $O/wgmma_seed6767.log 2>&1; t "wgmma seed 6767001234800297631" $?) &
(SAGE2_GPU_TESTS_REDUCED=1 timeout 300 $T -tc='gpu quantize*' > $O/quantize_reduced.log 2>&1; t "gpu quantize reduced" $?) &
wait
tar czf $OUT/s22g.tgz -C /tmp s22g
grep -h "ERROR\|Status\|cases, worst" $O/*.log | head -30
