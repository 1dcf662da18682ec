#!/usr/bin/env bash
# Session 30 call a2 (788f7b2): the host's share of a synchronised e2e call, eager against a CUDA
# graph replay of the same call, sage2 and cuDNN (host_graph.py).
set -u
O=/tmp/s30a2; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s30-nvcache SAGE2_TIERED_COMPILE=0
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
.dev-sb/tools/sage2-info --version > $O/version.txt 2>&1
cp .scratch/s30/a2.sh $O/run.sh; cp .scratch/s30/host_graph.py $O/
PYTHONPATH=$PWD/python SAGE2_LIBRARY=$PWD/.dev-sb/libsage2.so timeout 200 python3 .scratch/s30/host_graph.py $O/host_graph.jsonl > $O/host_graph.log 2>&1; t host_graph $?
tail -40 $O/host_graph.log
tar czf $OUT/s30a2.tgz -C /tmp s30a2
