#!/usr/bin/env bash
# Session 24 call a2 (a1 again: a1's per-round files did not come back): the in-kernel K/V
# quantization timing prototype (branch s24-kv-prologue-exp) against main, 3 rounds alternated.
set -u
O=$OUT/a2; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s24a-nvcache
timeout 420 bash bench/stage_ab.sh /tmp/s24a2 3 exp=.dev base=.dev-base > /dev/null
echo "stage_ab rc=$?" >> $O/steps.txt
python3 bench/stage_compare.py "/tmp/s24a2/stage_base_r*.jsonl" "/tmp/s24a2/stage_exp_r*.jsonl" > $O/compare.txt 2>&1
python3 .scratch/s24/attn_delta.py /tmp/s24a2 base exp > $O/attn_delta.txt 2>&1
tar czf $O/ab.tgz -C /tmp s24a2
cp .scratch/s24/a2.sh $O/run.sh
cat $O/attn_delta.txt
