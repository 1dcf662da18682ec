#!/usr/bin/env bash
# Session 20 call a: the e2e / kernel / real / small scoreboard groups on main's code (1fe14ec, the
# sampled stage) and ncu of the three split quantize kernels at Flux and B4 H32 hd 128 8K.
set -u
O=/tmp/s20a; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s20a-nvcache
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
.dev/tools/sage2-info --version > $O/version.txt 2>&1
bash bench/scoreboard_run.sh --out $O/sb --build .dev --modes e2e,kernel,real,small --budget-s 330 > $O/sb_run.log 2>&1
t "scoreboard" $?
for s in flux-1024 b4h32-hd128-8k qwen2.5-7b-prefill-4k; do
  SAGE2_LIBRARY=$PWD/.dev/libsage2.so timeout 80 ncu --target-processes all -k regex:"sage2_(channel_stats|quantize_k|quantize_v)" --launch-skip 3 --launch-count 3 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats \
    --metrics gpu__time_duration.sum,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    python3 bench/ncu_quantize.py $s > $O/ncu_$s.txt 2>&1
  t "ncu $s" $?
done
tar czf $OUT/s20a.tgz -C /tmp s20a
