#!/usr/bin/env bash
# Session 24 call a3: quantize_k / quantize_v CTA size by rows_in_registers_threads (hd 64: 128
# threads) — K only (4ee50ef, .dev-k), K and V (2c6ed0e, .dev, + sm_shared_bytes) against main
# (d1f4233, .dev-base): the quant shapes' stage, 3 rounds alternated; then the whole C++ GPU suite
# on 2c6ed0e (4 shards).
set -u
O=$OUT/a3; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s24a3-nvcache
timeout 200 bash bench/stage_ab.sh /tmp/s24a3 3 kv=.dev k=.dev-k base=.dev-base > /dev/null
echo "stage_ab rc=$?" >> $O/steps.txt
for n in kv k; do
  python3 bench/stage_compare.py "/tmp/s24a3/stage_base_r*.jsonl" "/tmp/s24a3/stage_${n}_r*.jsonl" > $O/compare_$n.txt 2>&1
done
tar czf $O/ab.tgz -C /tmp s24a3
cat $O/compare_kv.txt $O/compare_k.txt
timeout 370 bash scripts/gpu_run.sh /tmp/s24a3-suite --bundle .dev --suite "" --shards 4 > $O/gpu_run.log 2>&1
echo "gpu_run rc=$?" >> $O/steps.txt
tar czf $O/suite.tgz -C /tmp s24a3-suite
tail -15 $O/gpu_run.log
cp .scratch/s24/a3.sh $O/run.sh
