#!/usr/bin/env bash
# Session 27 call b1: the anatomy of the e2e call's time outside its kernels (host_probe.py).
set -u
O=/tmp/s27b1; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s27-nvcache PYTHONPATH=$PWD/python SAGE2_LIBRARY=$PWD/.dev/libsage2.so SAGE2_TIERED_COMPILE=0
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
.dev/tools/sage2-info --version > $O/version.txt 2>&1
nvidia-smi -q -d CLOCK > $O/clocks.txt 2>&1
timeout 240 python3 .scratch/s27/host_probe.py $O > $O/host_probe.log 2>&1; t host_probe $?
TAG=no_overlap SHAPES=tiny,hd128-1k,qwen METHODS=sage2 SAGE2_DISABLE_LAUNCH_OVERLAP=1 timeout 100 python3 .scratch/s27/host_probe.py $O > $O/no_overlap.log 2>&1; t no_overlap $?
timeout 60 .dev/bench/sage2-bench-attention --modes host --host-calls 2000 > $O/cpp_host.log 2>&1; t cpp_host $?
tar cf $OUT/s27b1.tar -C /tmp s27b1
