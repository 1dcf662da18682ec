#!/usr/bin/env bash
# Session 27 call a3: bench/path_crossover.py on main's code (the Auto rule's data, issue 39 item 2).
set -u
O=/tmp/s27a3; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s27-nvcache PYTHONPATH=$PWD/python SAGE2_LIBRARY=$PWD/.dev/libsage2.so SAGE2_TIERED_COMPILE=0
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
.dev/tools/sage2-info --version > $O/version.txt 2>&1
timeout 420 python3 bench/path_crossover.py --out $O/crossover.jsonl --rounds 3 > $O/crossover.txt 2>&1; t crossover $?
tar cf $OUT/s27a3.tar -C /tmp s27a3
