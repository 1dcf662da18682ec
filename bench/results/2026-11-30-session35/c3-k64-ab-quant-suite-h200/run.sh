#!/usr/bin/env bash
# Session 35 c3: main with the wgmma family's K at 64 registers (the commit sage2-info reports):
# the quantize stage against main's previous library (.dev-base, 6890513) at the 18 `quant` shapes
# and 4 other head dims (80, 96, 192, 256), 3 rounds alternated; the `quant` records (3 rounds
# merged); the whole C++ GPU suite in 4 shards.
set -u
export STAGE_SHAPES=flux-1024,sdxl-1024,qwen2.5-7b-prefill-4k,whisper-large-enc,dit-xl-512,bert-large-512,b4h32-hd64-1k,b4h32-hd64-2k,b4h32-hd64-4k,b4h32-hd64-8k,b4h32-hd64-16k,b4h32-hd64-32k,b4h32-hd128-1k,b4h32-hd128-2k,b4h32-hd128-4k,b4h32-hd128-8k,b4h32-hd128-16k,b4h32-hd128-32k,vit-h14-257,b4h16-hd96-2k,b2h16-hd192-4k,b2h16-hd256-4k
timeout 580 bash scripts/gpu_run.sh $OUT/c3 --bundle .dev --stage-ab .dev-base --quant-records --suite "" --shards 4 > $OUT/c3_run.txt 2>&1
tail -n 45 $OUT/c3_run.txt
cat $OUT/c3/ab/compare.txt 2>/dev/null
cd $OUT && tar cJf c3.tar.xz c3 c3_run.txt && rm -rf c3 c3_run.txt
