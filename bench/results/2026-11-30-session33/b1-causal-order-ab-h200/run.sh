#!/usr/bin/env bash
# Session 33 b1: the causal CTA start order (branch s32-causal-lpt-order rebased on main, .dev)
# against main b2526b4 (.dev-base), the attention kernel and the e2e call, 3 rounds alternated.
set -uo pipefail
o=$OUT/b1; mkdir -p $o
.dev/tools/sage2-info --version > $o/version_after.txt 2>&1
.dev-base/tools/sage2-info --version > $o/version_before.txt 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $o/gpu.txt
t0=$(date +%s)
bash scripts/ab_attention.sh $o/dense .dev-base .dev 3 --head-dims 64,128 --seq-lens 1024,2048,4096,8192 --causal 1 --modes kernel,e2e --reps 20 --flush-l2 256 > $o/dense.log 2>&1
echo "dense $(( $(date +%s) - t0 )) s" >> $o/times.txt
bash scripts/ab_attention.sh $o/gqa .dev-base .dev 3 --batch 1 --heads 28 --kv-heads 4 --seq-lens 3000,4096 --head-dims 128 --causal 1 --modes kernel,e2e --reps 20 --flush-l2 256 > $o/gqa.log 2>&1
echo "gqa $(( $(date +%s) - t0 )) s" >> $o/times.txt
bash scripts/ab_attention.sh $o/full .dev-base .dev 2 --head-dims 128 --seq-lens 1024,4096 --causal 0 --modes kernel --reps 20 --flush-l2 256 > $o/full.log 2>&1
echo "full $(( $(date +%s) - t0 )) s" >> $o/times.txt
python3 bench/ab_compare.py $o/dense > $o/dense_compare.txt 2>&1
python3 bench/ab_compare.py $o/gqa > $o/gqa_compare.txt 2>&1
python3 bench/ab_compare.py $o/full > $o/full_compare.txt 2>&1
cat $o/*_compare.txt $o/times.txt
cd $OUT && tar cJf b1.tar.xz b1 && rm -rf b1
