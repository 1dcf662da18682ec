#!/usr/bin/env bash
# Session 29, CPU only: the mma main loop's SASS census (instructions a 64x64 unit per warp, the
# default tile bq64.bk64.w4.s2) of 120be65 (the tensor-core row sum), 216094e (the kept K / V̂
# sources, landed) and 6ff8d7a (+ the kept shared-memory destinations; branch s29-kv-dst, no GPU
# suite run). BUILD: a build folder of the commit (sage2-info --version reports it).
set -eu
BUILD=${BUILD:-build}; TAG=${TAG:-$(git rev-parse --short HEAD)}
for a in "sm_80 fp16" "sm_89 fp8"; do
  set -- $a
  SAGE2_BUILD=$PWD/$BUILD SAGE2_SASS_FILTER='^attn_mma' bash scripts/sage2_sass.sh $1 /tmp/census-$1 --pv $2 --causal none --head-dims 64,128
  for f in /tmp/census-$1/*.sass; do
    python3 scripts/sass_census.py $f --kernel attention_mma --tile-units 0.25 > ${TAG}_$(basename $f .sass).md
  done
done
