#!/usr/bin/env bash
# Session 27 call a2: encoder shapes on the direct and the quantized path against cuDNN
# (path_probe.py; main's code cd9b8bd), for the Auto rule (issue 39 item 2).
set -u
O=/tmp/s27a2; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s27-nvcache PYTHONPATH=$PWD/python SAGE2_LIBRARY=$PWD/.dev/libsage2.so SAGE2_TIERED_COMPILE=0
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
.dev/tools/sage2-info --version > $O/version.txt 2>&1
timeout 300 python3 .scratch/s27/path_probe.py $O > $O/path_probe.log 2>&1; t path_probe $?
tar cf $OUT/s27a2.tar -C /tmp s27a2
