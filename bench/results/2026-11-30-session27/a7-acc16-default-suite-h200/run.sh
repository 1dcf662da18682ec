#!/usr/bin/env bash
# Session 27 call a7: the whole C++ GPU suite on 11fed12 (Auto = fp16 accumulation on sm_89/120/121), 4 shards.
set -u
O=/tmp/s27a7; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s27-nvcache
.dev/tools/sage2-info --version > $O/version.txt 2>&1
bash scripts/gpu_run.sh $O/suite --bundle .dev --suite "" --shards 4 > $O/gpu_run.log 2>&1
echo "gpu_run rc=$?" >> $O/gpu_run.log
tar cf $OUT/s27a7.tar -C /tmp s27a7
