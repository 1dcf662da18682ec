#!/usr/bin/env bash
# Session 20 call c: the sampled cluster stage (.dev, 4213ac4) against main's split sampled stage
# (.dev-base, 1fe14ec): GPU tests of the quantize stage and the Auto calls, then the quant group's
# stage profile, 3 rounds per build alternated.
set -u
O=/tmp/s20c; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s20c-nvcache PYTHONPATH=$PWD/python
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
for d in .dev .dev-base; do $d/tools/sage2-info --version >> $O/version.txt 2>&1; done
timeout 330 .dev/tests/sage2_gpu_tests -tc='gpu quantize: every variant*,gpu nonfinite: quantize*,gpu attention: matrix*,gpu wgmma: Q quantized*,gpu attention: CUDA graph*,gpu concurrency*,gpu mask: bool*' > $O/gpu_tests.log 2>&1
t "gpu tests" $?
for r in 1 2 3; do
  for v in new base; do
    lib=.dev; [ $v = base ] && lib=.dev-base
    SAGE2_LIBRARY=$PWD/$lib/libsage2.so timeout 100 python3 bench/stage_profile.py --shapes quant --rounds 1 --calls 3 --out $O/stage_${v}_r$r.jsonl > $O/stage_${v}_r$r.log 2>&1
    t "stage $v r$r" $?
  done
done
tar czf $OUT/s20c.tgz -C /tmp s20c
