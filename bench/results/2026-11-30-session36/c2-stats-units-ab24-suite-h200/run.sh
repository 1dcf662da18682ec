#!/usr/bin/env bash
# Session 36 c2: the units-at-once channel_stats (the commit sage2-info reports): the quantize stage
# against 34cc008's library (.dev-sb) at the 18 `quant` shapes and 6 encoder / head-dim shapes, 3
# rounds alternated; the `quant` records (3 rounds merged); the whole C++ GPU suite in 4 shards.
# (c4 runs this script with RUN=c4 on 48a4059's bundle.)
set -u
N=${RUN:-c2}
export STAGE_SHAPES=flux-1024,sdxl-1024,qwen2.5-7b-prefill-4k,whisper-large-enc,dit-xl-512,bert-large-512,b4h32-hd64-1k,b4h32-hd64-2k,b4h32-hd64-4k,b4h32-hd64-8k,b4h32-hd64-16k,b4h32-hd64-32k,b4h32-hd128-1k,b4h32-hd128-2k,b4h32-hd128-4k,b4h32-hd128-8k,b4h32-hd128-16k,b4h32-hd128-32k,vit-b16-197,clip-l14-257,vit-h14-257,b4h16-hd96-2k,b2h16-hd192-4k,b2h16-hd256-4k
timeout 590 bash scripts/gpu_run.sh $OUT/$N --bundle .dev --stage-ab .dev-sb --quant-records --suite "" --shards 4 > $OUT/${N}_run.txt 2>&1
tail -n 30 $OUT/${N}_run.txt
cat $OUT/$N/ab/compare.txt 2>/dev/null
cd $OUT && tar cJf $N.tar.xz $N ${N}_run.txt && rm -rf $N ${N}_run.txt
