#!/usr/bin/env bash
# Session 31 call a6 (issue 41, 104a6bf): the mma family's hd 64 tiles through PTX on the H200
# (SAGE2_TARGET_ARCH sm_80 / sm_89: the driver JIT-compiles their PTX): the default bq64.bk64.w4.s2
# against bq128.bk64.w4.s2 (32 rows a warp: the reference's LDSM count on the CPU census),
# sage2-autotune --no-db, B 4 H 32, N 2K / 8K, causal none / top-left.
set -u
O=/tmp/s31a6; mkdir -p $O
export SAGE2_CACHE_DIR=/tmp/s31-a6cache CUDA_CACHE_PATH=/tmp/s31-nvcache
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
.dev-sb/tools/sage2-info --version > $O/version.txt 2>&1
cp .scratch/s31/a6.sh $O/run.sh
for arch in sm_80 sm_89; do
  SAGE2_TARGET_ARCH=$arch timeout 170 .dev-sb/tools/sage2-autotune --device 0 --no-db --no-progress --reps 20 --head-dims 64 --dtypes f16 --causal none,top-left --seq-lens 2048,8192 --batch 4 --heads 32 --family mma --tiles 64x64x4x2,128x64x4x2 --report $O/tiles_$arch.json > $O/tiles_$arch.txt 2>&1; t "autotune $arch" $?
  tail -30 $O/tiles_$arch.txt
  tar czf $OUT/s31a6.tgz -C /tmp s31a6
done
# The sm_80 run above failed (--pv auto resolved with the device's arch, sm_90a: FP8 P~V, which sm_80
# has not; a defect of sage2-autotune under SAGE2_TARGET_ARCH, fixed after this session's call a6).
# It was repeated in the same lease with the P~V precision given (tiles_sm_80_fp16.*):
#   SAGE2_TARGET_ARCH=sm_80 .dev-sb/tools/sage2-autotune --device 0 --no-db --no-progress --reps 20 --head-dims 64 \
#     --dtypes f16 --pv fp16 --causal none,top-left --seq-lens 2048,8192 --batch 4 --heads 32 --family mma \
#     --tiles 64x64x4x2,128x64x4x2 --report tiles_sm_80_fp16.json
