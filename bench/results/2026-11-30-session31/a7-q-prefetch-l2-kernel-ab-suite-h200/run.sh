#!/usr/bin/env bash
# Session 31 call a7: the next wave's Q prefetched into L2 by warp 0 (the one-warpgroup wgmma
# design, Q quantized in the kernel). (1) kernel mode A/B: .dev-sb (104a6bf = edbfadd's library
# code) vs .dev (the change), Auto, 3 rounds alternated, hd 64 / 128, N 1K-8K, causal 0 / 1;
# (2) the whole C++ GPU suite on the change, 4 shards.
set -u
O=/tmp/s31a7; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s31-nvcache SAGE2_TIERED_COMPILE=0
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
.dev/tools/sage2-info --version > $O/version.txt 2>&1; .dev-sb/tools/sage2-info --version >> $O/version.txt 2>&1
cp .scratch/s31/a7.sh $O/run.sh
for r in 1 2 3; do
  for n in new base; do
    b=.dev; [[ $n == base ]] && b=.dev-sb
    timeout 90 $b/bench/sage2-bench-attention --head-dims 64,128 --seq-lens 1024,2048,4096,8192 --causal 0,1 --modes kernel --json $O/k_${n}_r$r.records.txt > $O/k_${n}_r$r.log 2>&1; t "kernel $n r$r" $?
  done
done
tar czf $OUT/s31a7_k.tgz -C /tmp s31a7
timeout 320 bash scripts/gpu_run.sh $O/suite --bundle .dev --suite "" --shards 4 > $O/gpu_run.log 2>&1; t gpu_run $?
tail -6 $O/gpu_run.log
tar czf $OUT/s31a7.tgz -C /tmp s31a7
