#!/usr/bin/env bash
# Session 35 c7: 34cc008 (quantize_v at rows of 12 chunks: 4 lanes x 3 chunks; the commit sage2-info reports):
# the quantize stage against 26e6642 (.dev-sb) at the shapes with hd 65-96 and two controls,
# 3 rounds alternated; the `quant` records (3 rounds
# merged); the whole C++ GPU suite in 4 shards.
set -u
export STAGE_SHAPES=dit-xl-512,vit-h14-257,b4h16-hd96-2k,b4h32-hd64-1k,b4h32-hd128-1k
timeout 580 bash scripts/gpu_run.sh $OUT/c7 --bundle .dev --stage-ab .dev-sb --quant-records --suite "" --shards 4 > $OUT/c7_run.txt 2>&1
tail -n 45 $OUT/c7_run.txt
cat $OUT/c7/ab/compare.txt 2>/dev/null
cd $OUT && tar cJf c7.tar.xz c7 c7_run.txt && rm -rf c7 c7_run.txt
