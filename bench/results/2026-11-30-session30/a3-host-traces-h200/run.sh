#!/usr/bin/env bash
# Session 30 call a3 (788f7b2): profiler traces (CPU + CUDA) of eager e2e calls, sage2 and cuDNN,
# at hd 128 1K, hd 64 2K and Flux (trace_probe.py), for where the host's share goes.
set -u
O=/tmp/s30a3; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s30-nvcache SAGE2_TIERED_COMPILE=0
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
.dev-sb/tools/sage2-info --version > $O/version.txt 2>&1
cp .scratch/s30/a3.sh $O/run.sh; cp .scratch/s30/trace_probe.py $O/
PYTHONPATH=$PWD/python SAGE2_LIBRARY=$PWD/.dev-sb/libsage2.so timeout 200 python3 .scratch/s30/trace_probe.py $O/traces > $O/trace_probe.log 2>&1; t trace_probe $?
tail -30 $O/trace_probe.log
xz -T4 $O/traces/*.json
tar cf $OUT/s30a3.tar -C /tmp s30a3
