#!/bin/bash
# Session 22 call j: the whole C++ GPU suite (4 shards) on 70a4674 (.dev).
set -u
O=/tmp/s22j; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s22j-nvcache
.dev/tools/sage2-info --version > $O/version.txt 2>&1
bash scripts/gpu_run.sh $O/suite --bundle .dev --suite "" --shards 4 > $O/gpu_run.log 2>&1
echo "suite rc=$?" >> $O/steps.txt
tar czf $OUT/s22j.tgz -C /tmp s22j
tail -12 $O/gpu_run.log
