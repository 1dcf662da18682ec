#!/usr/bin/env bash
# Session 39 d1: channel_stats' one-pass walk over a whole head (the commit sage2-info reports)
# against f12441c's library (.dev-sb): the quantize stage at the 24 shapes of session 36's c2 plus
# two of 192 (batch, kv head) pairs (formerly clusters of 2 on sm_90a), 3 rounds alternated; the
# `quant` records; the whole C++ GPU suite in 4 shards.
set -u
N=${RUN:-d1}
export STAGE_SHAPES=flux-1024,sdxl-1024,qwen2.5-7b-prefill-4k,whisper-large-enc,dit-xl-512,bert-large-512,b4h32-hd64-1k,b4h32-hd64-2k,b4h32-hd64-4k,b4h32-hd64-8k,b4h32-hd64-16k,b4h32-hd64-32k,b4h32-hd128-1k,b4h32-hd128-2k,b4h32-hd128-4k,b4h32-hd128-8k,b4h32-hd128-16k,b4h32-hd128-32k,vit-b16-197,clip-l14-257,vit-h14-257,b4h16-hd96-2k,b2h16-hd192-4k,b2h16-hd256-4k,b8h24-hd128-2k,b16h12-hd64-1k
timeout 590 bash scripts/gpu_run.sh $OUT/$N --bundle .dev --stage-ab .dev-sb --quant-records --suite "" --shards 4 > $OUT/${N}_run.txt 2>&1
tail -n 30 $OUT/${N}_run.txt
cat $OUT/$N/ab/compare.txt 2>/dev/null
cd $OUT && tar cJf $N.tar.xz $N ${N}_run.txt && rm -rf $N ${N}_run.txt
