#!/usr/bin/env bash
# Session 27 call a4 (8721588, the direct rule's row bound): path_crossover (the rule's choice per
# shape), the encoder path probe, and the scoreboard records (e2e, kernel, real, small).
set -u
O=/tmp/s27a4; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s27-nvcache SAGE2_TIERED_COMPILE=0
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
.dev/tools/sage2-info --version > $O/version.txt 2>&1
PYTHONPATH=$PWD/python SAGE2_LIBRARY=$PWD/.dev/libsage2.so timeout 120 python3 bench/path_crossover.py --out $O/crossover.jsonl --rounds 3 > $O/crossover.txt 2>&1; t crossover $?
PYTHONPATH=$PWD/python SAGE2_LIBRARY=$PWD/.dev/libsage2.so timeout 150 python3 .scratch/s27/path_probe.py $O > $O/path_probe.log 2>&1; t path_probe $?
timeout 330 bash bench/scoreboard_run.sh --out $O/sb --build .dev --modes e2e,kernel,real,small --budget-s 280 > $O/sb_run.log 2>&1; t scoreboard $?
tar cf $OUT/s27a4.tar -C /tmp s27a4
