#!/usr/bin/env bash
# Session 30 call c1: the Python suite from the installed wheel of 4848fe6 (library code = 788f7b2's;
# python/: the workspace kept up to 64 MiB), with the integrations (scripts/gpu_integrations.sh sets
# SAGE2_REQUIRE_GPU_TESTS=1).
set -u
O=/tmp/s30c1; mkdir -p $O
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
cp .scratch/s30/c1.sh $O/run.sh
timeout 520 bash scripts/gpu_integrations.sh $O/py --wheel wheelhouse/sage2-0.1.0-py3-none-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl > $O/py.log 2>&1; t integrations $?
tail -5 $O/py.log; cat $O/py/summary.txt 2>/dev/null | tail -5
tar czf $OUT/s30c1.tgz -C /tmp s30c1
