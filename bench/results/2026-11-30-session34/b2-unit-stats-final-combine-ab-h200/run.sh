#!/usr/bin/env bash
# Session 34 b2: the in-kernel sampled statistics with one combine per head (the CTA completing a
# head's units writes k_stats / v_stats; the others wait for it and read them there) against main
# (aa0f941): the quantize stage, 3 rounds alternated at the 18 `quant` shapes; then the GPU
# quantize and non-finite tests on the new build (2 shards).
set -u
bash scripts/gpu_run.sh $OUT/b2 --bundle .dev --stage-ab .dev-base --suite "gpu quantize*,gpu nonfinite*" --shards 2 > $OUT/b2_run.txt 2>&1
tail -n 30 $OUT/b2_run.txt
cd $OUT && tar cJf b2.tar.xz b2 b2_run.txt && rm -rf b2 b2_run.txt
