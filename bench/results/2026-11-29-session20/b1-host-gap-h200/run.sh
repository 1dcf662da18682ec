#!/usr/bin/env bash
# Session 20 call b: where the e2e call's time outside its kernels goes (.scratch/host_gap.py), and
# ncu of the three split quantize kernels at Flux, B4 H32 hd 128 8K and Qwen prefill.
set -u
O=/tmp/s20b; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s20b-nvcache PYTHONPATH=$PWD/python SAGE2_LIBRARY=$PWD/.dev/libsage2.so
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
.dev/tools/sage2-info --version > $O/version.txt 2>&1
timeout 200 python3 .scratch/host_gap.py $O > $O/host_gap.log 2>&1
t "host_gap" $?
for s in flux-1024 b4h32-hd128-8k qwen2.5-7b-prefill-4k; do
  timeout 80 ncu --target-processes all -k regex:"sage2_(channel_stats|quantize_k|quantize_v)" --launch-skip 3 --launch-count 3 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats \
    --metrics gpu__time_duration.sum,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    python3 bench/ncu_quantize.py $s > $O/ncu_$s.txt 2>&1
  t "ncu $s" $?
done
xz -9 $O/trace_*.json
tar cf $OUT/s20b.tar -C /tmp s20b
