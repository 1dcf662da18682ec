#!/usr/bin/env bash
# Session 24 call a4: the final quantize_k / quantize_v CTA rule (95c32ab: the wgmma family's
# K/V CTAs of <= 128 threads at <= 64 registers; mma family unchanged) against main (d1f4233):
# the quant shapes' stage, 3 rounds alternated (the `quant` records); then the whole C++ GPU suite
# on 95c32ab (4 shards).
set -u
O=$OUT/a4; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s24a4-nvcache
timeout 150 bash bench/stage_ab.sh /tmp/s24a4 3 new=.dev base=.dev-base > /dev/null
echo "stage_ab rc=$?" >> $O/steps.txt
python3 bench/stage_compare.py "/tmp/s24a4/stage_base_r*.jsonl" "/tmp/s24a4/stage_new_r*.jsonl" > $O/compare.txt 2>&1
tar czf $O/ab.tgz -C /tmp s24a4
cat $O/compare.txt
timeout 400 bash scripts/gpu_run.sh /tmp/s24a4-suite --bundle .dev --suite "" --shards 4 > $O/gpu_run.log 2>&1
echo "gpu_run rc=$?" >> $O/steps.txt
tar czf $O/suite.tgz -C /tmp s24a4-suite
tail -12 $O/gpu_run.log
cp .scratch/s24/a4.sh $O/run.sh
