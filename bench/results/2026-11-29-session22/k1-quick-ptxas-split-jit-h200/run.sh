#!/bin/bash
# Session 22 call k: the quick tier's multi-threaded ptxas (.dev, d3c108e) against 70a4674
# (.dev-base): cold first calls alternated (base 200/320, new 72/136/200/320, base, new), then
# the tiered-compile GPU tests on d3c108e.
set -u
O=/tmp/s22k; mkdir -p $O
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
for d in .dev .dev-base; do $d/tools/sage2-info --version >> $O/version.txt 2>&1; done
bash scripts/gpu_cold_jit.sh $O/jit_base1 .dev-base "200 320" 3 > $O/jit_base1.log 2>&1; t "cold jit base 1" $?
bash scripts/gpu_cold_jit.sh $O/jit_new1 .dev "72 136 200 320" 3 > $O/jit_new1.log 2>&1; t "cold jit new 1" $?
bash scripts/gpu_cold_jit.sh $O/jit_base2 .dev-base "200 320" 3 > $O/jit_base2.log 2>&1; t "cold jit base 2" $?
bash scripts/gpu_cold_jit.sh $O/jit_new2 .dev "200 320" 3 > $O/jit_new2.log 2>&1; t "cold jit new 2" $?
tar czf $OUT/s22k-jit.tgz -C /tmp s22k
CUDA_CACHE_PATH=/tmp/s22k-nv timeout 80 .dev/tests/sage2_gpu_tests -tc='gpu tiered compile*' > $O/tiered.log 2>&1; t "gpu tiered compile tests" $?
tar czf $OUT/s22k.tgz -C /tmp s22k
for f in $O/jit_*/first_call.jsonl; do echo $f; grep '"mode"' $f | python3 -c "import sys,json; [print(' ', r['head_dim'], r['s_rounds'], r.get('optimized_after_s')) for r in map(json.loads, sys.stdin)]"; done
tail -3 $O/tiered.log
