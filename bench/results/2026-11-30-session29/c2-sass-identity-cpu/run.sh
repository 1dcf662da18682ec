#!/usr/bin/env bash
# Session 29, CPU only: 3144a15 (comment moved in attention_softmax.cuh, the exponent scales from one
# lambda in attention_mma.cuh) against its parent 0150822 — the real SASS of 104 attention kernels,
# compared byte for byte. Run once with BUILD at the parent (TAG=0), once at 3144a15 (TAG=1), then compare.
set -eu
BUILD=${BUILD:-build}; TAG=${TAG:?0 or 1}
for a in "sm_80 fp16" "sm_89 fp8" "sm_90a fp8" "sm_100 fp8" "sm_120 fp8"; do
  set -- $a
  SAGE2_BUILD=$PWD/$BUILD SAGE2_SASS_FILTER='^attn_' bash scripts/sage2_sass.sh $1 /tmp/id${TAG}_$1 --pv $2 \
    --causal none,top-left --head-dims 64,128 --tiles 64x64x4x2,128x64x4x2,128x64x8x2 --bits 8,4
done
SAGE2_BUILD=$PWD/$BUILD SAGE2_SASS_FILTER='^attn_' bash scripts/sage2_sass.sh sm_90a /tmp/id${TAG}_wg --family wgmma \
  --causal none,top-left --head-dims 64,128 --tiles 64x128x4x2,128x128x8x2
if [ "$TAG" = 1 ]; then
  n=0 d=0
  for x in sm_80 sm_89 sm_90a sm_100 sm_120 wg; do
    for f in /tmp/id0_$x/*.sass; do n=$((n+1)); cmp -s $f /tmp/id1_$x/$(basename $f) || { d=$((d+1)); echo "DIFF $f"; }; done
  done
  echo "compared $n, differing $d"
fi
