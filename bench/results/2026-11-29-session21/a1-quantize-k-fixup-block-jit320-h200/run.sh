#!/bin/bash
# Session 21 call a: quantize_k's fix-up block (.dev, 02be119) against the fix-up in block 0's tail
# (.dev-base, 9040ebd): the quantize GPU tests, then the quant group's stage profile, 3 rounds per
# build alternated; then hd-320 quick builds on this host (alone, at once), NVRTC times of their
# sources, and cold first calls at hd 320 (channel_stats without its second walk instantiation).
set -u
O=/tmp/s21a; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s21a-nvcache PYTHONPATH=$PWD/python
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
for d in .dev .dev-base; do $d/tools/sage2-info --version >> $O/version.txt 2>&1; done
(nproc; lscpu | head -20) > $O/host.txt 2>&1
timeout 200 .dev/tests/sage2_gpu_tests -tc='gpu quantize: every variant*,gpu nonfinite: quantize*,gpu attention: matrix*' > $O/gpu_tests.log 2>&1
t "gpu tests" $?
for r in 1 2 3; do
  for v in new base; do
    lib=.dev; [ $v = base ] && lib=.dev-base
    SAGE2_LIBRARY=$PWD/$lib/libsage2.so timeout 100 python3 bench/stage_profile.py --shapes quant --rounds 1 --calls 3 --out $O/stage_${v}_r$r.jsonl > $O/stage_${v}_r$r.log 2>&1
    t "stage $v r$r" $?
  done
done
export SAGE2_JIT_WORKER=$PWD/.dev/tools/sage2-jit-worker
for i in 1 2; do CUDA_CACHE_PATH=$(mktemp -d) .scratch/s21/time_quick 320 >> $O/time_quick_320.txt 2>&1; done
t "time_quick" $?
for f in attn qk stats; do REPS=5 python3 .scratch/s21/qt.py templates .scratch/s21/d320/$f.cu --Ofast-compile=max 2>&1 | grep median; done > $O/nvrtc_quick_320.txt
t "nvrtc" $?
unset SAGE2_JIT_WORKER
bash scripts/gpu_cold_jit.sh $O/jit .dev "320" 3 > $O/jit.log 2>&1
t "cold jit" $?
tar czf $OUT/s21a.tgz -C /tmp s21a
tail -3 $O/gpu_tests.log; cat $O/time_quick_320.txt $O/nvrtc_quick_320.txt; grep -h '"mode"' $O/jit/first_call.jsonl | cut -c1-300
