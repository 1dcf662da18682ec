#!/usr/bin/env bash
# Session 27 call a1: the tile clusters (QuantOp::TileClusters) — the GPU quantize test's short
# cases against the reference and byte for byte against the split kernels, then the stage of the
# encoder shapes and BERT, auto (tile clusters) against split, 3 rounds alternated.
set -u
O=/tmp/s27a1; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s27-nvcache PYTHONPATH=$PWD/python SAGE2_TIERED_COMPILE=0
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
.dev/tools/sage2-info --version > $O/version.txt 2>&1
for c in "N=512 d=64" "N=197 d=80" "N=300 d=128" "N=256 d=96" "N=127 d=" "N=17 d=" "N=1 d="; do
  SAGE2_TEST_QUANT_CASE="$c" timeout 120 .dev/tests/sage2_gpu_tests -tc="gpu quantize: every variant*" > "$O/quant_${c// /_}.log" 2>&1
  t "quant case $c" $?
done
STAGE_SHAPES=encoders timeout 200 bash bench/stage_ab.sh $O/ab 3 auto=.dev split=.dev:SAGE2_QUANT_PATH=split > $O/ab.log 2>&1; t stage_ab $?
python3 bench/stage_compare.py "$O/ab/stage_split_r*.jsonl" "$O/ab/stage_auto_r*.jsonl" > $O/compare.txt 2>&1; t compare $?
tar cf $OUT/s27a1.tar -C /tmp s27a1
