#!/usr/bin/env bash
# Session 27 call a6: the Python suite from the tree against 8721588's library (SAGE2_REQUIRE_GPU_TESTS=1).
set -u
O=/tmp/s27a6; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s27-nvcache SAGE2_REQUIRE_GPU_TESTS=1
.dev/tools/sage2-info --version > $O/version.txt 2>&1
bash scripts/gpu_run.sh $O/py --bundle .dev --pytest > $O/gpu_run.log 2>&1
echo "gpu_run rc=$?" >> $O/gpu_run.log
tar cf $OUT/s27a6.tar -C /tmp s27a6
