#!/usr/bin/env bash
# Session 24 call a1: the in-kernel K/V quantization timing prototype (branch s24-kv-prologue-exp)
# against main: the quant shapes' stage and attention kernel, 3 rounds alternated.
set -u
O=$OUT/a1; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s24a-nvcache
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > $O/gpu.txt 2>&1
timeout 420 bash bench/stage_ab.sh $O/ab 3 exp=.dev base=.dev-base
echo "stage_ab rc=$?" >> $O/steps.txt
python3 bench/stage_compare.py "$O/ab/stage_base_r*.jsonl" "$O/ab/stage_exp_r*.jsonl" > $O/compare.txt 2>&1
cp .scratch/s24/a1.sh $O/run.sh
