#!/usr/bin/env bash
# session 18 g2: the whole C++ GPU suite on the final code (the direct-path first tier).
cd "$(dirname "$0")/.."
O=/tmp/g2; rm -rf $O; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/g2-cc
start=$(date +%s)
timeout 540 bash scripts/gpu_run.sh $O/suite --bundle .dev --suite "" --shards 3 > $O/gpu_run.log 2>&1
echo "suite rc=$? t=$(( $(date +%s) - start ))"; tail -6 $O/gpu_run.log
tar czf $OUT/g2.tgz -C /tmp g2
