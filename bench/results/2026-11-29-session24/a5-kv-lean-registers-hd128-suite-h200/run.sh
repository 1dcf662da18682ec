#!/usr/bin/env bash
# Session 24 call a5: quantize_k / quantize_v at <= 64 registers for the wgmma family up to hd 128
# (a59c262: hd 128's K at 4 CTAs of 256 per SM) against 95c32ab: the quant shapes' stage, 3 rounds
# alternated (the `quant` records if kept); then the whole C++ GPU suite on a59c262 (4 shards).
set -u
O=$OUT/a5; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s24a5-nvcache
timeout 150 bash bench/stage_ab.sh /tmp/s24a5 3 new=.dev base=.dev-base > /dev/null
echo "stage_ab rc=$?" >> $O/steps.txt
python3 bench/stage_compare.py "/tmp/s24a5/stage_base_r*.jsonl" "/tmp/s24a5/stage_new_r*.jsonl" > $O/compare.txt 2>&1
tar czf $O/ab.tgz -C /tmp s24a5
cat $O/compare.txt
timeout 380 bash scripts/gpu_run.sh /tmp/s24a5-suite --bundle .dev --suite "" --shards 4 > $O/gpu_run.log 2>&1
echo "gpu_run rc=$?" >> $O/steps.txt
tar czf $O/suite.tgz -C /tmp s24a5-suite
tail -12 $O/gpu_run.log
cp .scratch/s24/a5.sh $O/run.sh
