#!/usr/bin/env bash
# Session 30 call d1 (branch s30-stats-clusters, 2a566c6): the sampled statistics combined in a
# cluster, no memset. The GPU tests that run the new path (the quantize stage on a poisoned
# workspace vs the CPU reference, the wgmma attention vs the emulation, graph replay), then the
# eager e2e through host_graph.py, base (4ef8d7b) / new / base / new.
set -u
O=/tmp/s30d1; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s30-nvcache SAGE2_TIERED_COMPILE=0
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
.dev/tools/sage2-info --version > $O/version.txt 2>&1; .dev-base/tools/sage2-info --version >> $O/version.txt 2>&1
cp .scratch/s30/d1.sh $O/run.sh
timeout 95 .dev/tests/sage2_gpu_tests -tc="gpu quantize: every variant*,gpu wgmma: quantize + ΔS + wgmma attention equals the emulation,gpu attention: CUDA graph capture*" > $O/tests.log 2>&1; t tests $?
tail -4 $O/tests.log
tar czf $OUT/s30d1_t.tgz -C /tmp s30d1
for r in 1 2; do
  for n in base new; do
    b=.dev; [[ $n == base ]] && b=.dev-base
    PYTHONPATH=$PWD/python SAGE2_LIBRARY=$PWD/$b/libsage2.so timeout 60 python3 .scratch/s30/host_graph.py $O/hg_${n}_r$r.jsonl > $O/hg_${n}_r$r.log 2>&1; t "host_graph $n r$r" $?
  done
done
tar czf $OUT/s30d1.tgz -C /tmp s30d1
