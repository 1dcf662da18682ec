#!/usr/bin/env bash
# Session 34 b1: the sampled statistics inside quantize_v / quantize_k (no channel_stats launch)
# against main (aa0f941): the quantize stage, 3 rounds alternated at the 18 `quant` shapes, then the
# whole C++ GPU suite (4 shards) on the new build.
set -u
bash scripts/gpu_run.sh $OUT/b1 --bundle .dev --stage-ab .dev-base --suite "" --shards 4 > $OUT/b1_run.txt 2>&1
tail -n 40 $OUT/b1_run.txt
cat $OUT/b1/ab/compare.txt 2>/dev/null | head -60
cd $OUT && tar cJf b1.tar.xz b1 b1_run.txt && rm -rf b1 b1_run.txt
