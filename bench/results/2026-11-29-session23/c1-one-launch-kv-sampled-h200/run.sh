#!/bin/bash
# Session 23 call c1: Auto's one-launch K/V kernel with sampled statistics (.dev, 2830b7b; c3 = the
# same with SAGE2_EXP_KV_MIN_CTAS=3) against main 9e90105 (.dev-base, the sampled split stage): the
# quant group's stage profile, 3 rounds per build alternated; then the GPU tests of the quantize
# stage (reduced), non-finite flags and the wgmma attention vs emulation, 4 processes at once.
set -u
O=/tmp/s23c; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s23c-nvcache PYTHONPATH=$PWD/python SAGE2_TIERED_COMPILE=0
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
bash bench/stage_ab.sh $O/ab 3 new=.dev c3=.dev:SAGE2_EXP_KV_MIN_CTAS=3 base=.dev-base
python3 bench/stage_compare.py "$O/ab/stage_base_r*.jsonl" "$O/ab/stage_new_r*.jsonl" > $O/compare_new.txt 2>&1
python3 bench/stage_compare.py "$O/ab/stage_base_r*.jsonl" "$O/ab/stage_c3_r*.jsonl" > $O/compare_c3.txt 2>&1
tar czf $OUT/s23c-ab.tgz -C /tmp s23c
T=.dev/tests/sage2_gpu_tests
(SAGE2_GPU_TESTS_REDUCED=1 timeout 280 $T -tc='gpu quantize*' > $O/quantize_reduced.log 2>&1; t "gpu quantize reduced" $?) &
(timeout 280 $T -tc='gpu nonfinite*' > $O/nonfinite.log 2>&1; t "gpu nonfinite" $?) &
(timeout 280 $T -tc='gpu wgmma: *' > $O/wgmma.log 2>&1; t "gpu wgmma" $?) &
(timeout 280 $T -tc='gpu attention: quantize + ΔS + mma*' > $O/mma.log 2>&1; t "gpu mma attention" $?) &
wait
tar czf $OUT/s23c.tgz -C /tmp s23c
cat $O/compare_new.txt $O/compare_c3.txt
grep -h "ERROR\|Status\|test cases" $O/*.log | head -40
