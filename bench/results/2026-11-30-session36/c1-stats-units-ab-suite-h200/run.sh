#!/usr/bin/env bash
# Session 36 c1: f636023 (channel_stats with every sampled unit at once): the quantize stage against
# 34cc008's library (.dev-sb) at the 18 `quant` shapes, 3 rounds alternated; the `quant` records
# (3 rounds merged); the whole C++ GPU suite in 4 shards.
set -u
timeout 580 bash scripts/gpu_run.sh $OUT/c1 --bundle .dev --stage-ab .dev-sb --quant-records --suite "" --shards 4 > $OUT/c1_run.txt 2>&1
tail -n 45 $OUT/c1_run.txt
cd $OUT && tar cJf c1.tar.xz c1 c1_run.txt && rm -rf c1 c1_run.txt
