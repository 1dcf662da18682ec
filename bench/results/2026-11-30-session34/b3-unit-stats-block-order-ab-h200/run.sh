#!/usr/bin/env bash
# Session 34 b3: the in-kernel sampled statistics without tickets (the launch's block order puts
# each head's sampled blocks first; a waiting CTA computes the units itself if one of them has not
# started), the sampled CTAs' partials from global rows before the rows they keep, V at <= 80
# registers: against main (aa0f941), the quantize stage 3 rounds alternated at the 18 `quant`
# shapes; then the GPU quantize and non-finite tests (2 shards).
set -u
bash scripts/gpu_run.sh $OUT/b3 --bundle .dev --stage-ab .dev-base --suite "gpu quantize*,gpu nonfinite*" --shards 2 > $OUT/b3_run.txt 2>&1
tail -n 30 $OUT/b3_run.txt
cd $OUT && tar cJf b3.tar.xz b3 b3_run.txt && rm -rf b3 b3_run.txt
