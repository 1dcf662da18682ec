#!/bin/bash
# Session 21 call d: (1) the varlen Python tests from the wheel of 5c6ca96 (session 20's a496a01 edit
# had not run on a GPU); (2) the two attention-vs-emulation failures of call c (random seeds) rerun
# with the same seeds on the code before this session's template changes (.dev-base, 9040ebd).
set -u
O=/tmp/s21d; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s21d-nvcache
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
.dev-base/tools/sage2-info --version > $O/version.txt 2>&1
timeout 300 bash scripts/gpu_integrations.sh $O/py --wheel wheelhouse/sage2-0.1.0-py3-none-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl --only "varlen" > $O/py.log 2>&1
t "python varlen" $?
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
SAGE2_TEST_SEED=13255569623320757087 timeout 150 .dev-base/tests/sage2_gpu_tests -tc='gpu attention: quantize + ΔS + mma attention*' > $O/seed_mma_base.log 2>&1
t "mma seed on base" $?
SAGE2_TEST_SEED=6767001234800297631 timeout 150 .dev-base/tests/sage2_gpu_tests -tc='gpu wgmma: quantize + ΔS + wgmma attention*' > $O/seed_wgmma_base.log 2>&1
t "wgmma seed on base" $?
tar czf $OUT/s21d.tgz -C /tmp s21d
tail -3 $O/py/summary.txt $O/py.log 2>/dev/null | tail -8
grep -h "ERROR\|Status" $O/seed_*.log | head
