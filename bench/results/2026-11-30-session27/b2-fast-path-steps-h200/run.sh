#!/usr/bin/env bash
# Session 27 call b2: the eager fast path's host time step by step (fc_steps.py), twice.
set -u
O=/tmp/s27b2; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s27-nvcache PYTHONPATH=$PWD/python SAGE2_LIBRARY=$PWD/.dev/libsage2.so SAGE2_TIERED_COMPILE=0
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
.dev/tools/sage2-info --version > $O/version.txt 2>&1
timeout 100 python3 .scratch/s27/fc_steps.py $O > $O/fc_steps.log 2>&1; t fc_steps $?
timeout 100 python3 .scratch/s27/fc_steps.py $O > $O/fc_steps2.log 2>&1; t fc_steps2 $?
lscpu > $O/lscpu.txt 2>&1; cat /proc/loadavg >> $O/lscpu.txt
tar cf $OUT/s27b2.tar -C /tmp s27b2
