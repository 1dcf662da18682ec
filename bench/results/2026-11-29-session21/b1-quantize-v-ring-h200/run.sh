#!/bin/bash
# Session 21 call b: the ring quantize_v (.dev, 1a6c2e3; SAGE2_V_TPC = tiles per CTA, default
# ~1024 CTAs) against the one-tile kernel (.dev-base, 9040ebd): the quant group's stage profile,
# 2 rounds per variant alternated; then the quantize GPU tests (reduced) on the ring build.
set -u
O=/tmp/s21b; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s21b-nvcache PYTHONPATH=$PWD/python
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
for d in .dev .dev-base; do $d/tools/sage2-info --version >> $O/version.txt 2>&1; done
for r in 1 2; do
  for v in base ring tpc2 tpc4 tpc8; do
    lib=.dev; [ $v = base ] && lib=.dev-base
    tpc=; case $v in tpc*) tpc=${v#tpc} ;; esac
    env ${tpc:+SAGE2_V_TPC=$tpc} SAGE2_LIBRARY=$PWD/$lib/libsage2.so timeout 100 python3 bench/stage_profile.py --shapes quant --rounds 1 --calls 3 --out $O/stage_${v}_r$r.jsonl > $O/stage_${v}_r$r.log 2>&1
    t "stage $v r$r" $?
  done
done
SAGE2_GPU_TESTS_REDUCED=1 timeout 300 .dev/tests/sage2_gpu_tests -tc='gpu nonfinite: quantize*,gpu quantize: every variant*' > $O/gpu_tests.log 2>&1
t "gpu tests" $?
tar czf $OUT/s21b.tgz -C /tmp s21b
tail -4 $O/gpu_tests.log
