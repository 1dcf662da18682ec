#!/usr/bin/env bash
# Session 38 d2: quantize_v in scopes of warps. d2a: 53f2793 (.dev: one-warp scopes where they fit)
# against f12441c's library (.dev-sb), the quantize stage at the 24 shapes, 3 rounds alternated,
# and the GPU quantize test cases (every variant against the CPU reference); d2b: branch
# s38-v-scope2 e19bb51 (.dev-base: scopes of at least 2 warps) against the same base.
set -u
export STAGE_SHAPES=flux-1024,sdxl-1024,qwen2.5-7b-prefill-4k,whisper-large-enc,dit-xl-512,bert-large-512,b4h32-hd64-1k,b4h32-hd64-2k,b4h32-hd64-4k,b4h32-hd64-8k,b4h32-hd64-16k,b4h32-hd64-32k,b4h32-hd128-1k,b4h32-hd128-2k,b4h32-hd128-4k,b4h32-hd128-8k,b4h32-hd128-16k,b4h32-hd128-32k,vit-b16-197,clip-l14-257,vit-h14-257,b4h16-hd96-2k,b2h16-hd192-4k,b2h16-hd256-4k
timeout 330 bash scripts/gpu_run.sh $OUT/d2a --bundle .dev --stage-ab .dev-sb --suite "gpu quantize*" --shards 1 > $OUT/d2a_run.txt 2>&1
tail -n 8 $OUT/d2a_run.txt
cat $OUT/d2a/ab/compare.txt 2>/dev/null
timeout 200 bash scripts/gpu_run.sh $OUT/d2b --bundle .dev-base --stage-ab .dev-sb --suite none > $OUT/d2b_run.txt 2>&1
tail -n 4 $OUT/d2b_run.txt
cat $OUT/d2b/ab/compare.txt 2>/dev/null
cd $OUT && tar cJf d2.tar.xz d2a d2b d2a_run.txt d2b_run.txt && rm -rf d2a d2b d2a_run.txt d2b_run.txt
