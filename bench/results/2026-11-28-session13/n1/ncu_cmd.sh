set -u
export PYTHONPATH=$PWD/python SAGE2_LIBRARY=$PWD/.dev/libsage2.so SAGE2_CACHE_DIR=/tmp/s2cache
R=/tmp/n1; mkdir -p $R
python3 bench/ncu_quantize.py flux-1024  # warm the kernel cache
for shape in flux-1024 b4h32-hd128-8k; do
  timeout 150 ncu --target-processes all -k regex:"sage2_(channel_stats|quantize_k|quantize_v)" --launch-skip 3 --launch-count 3 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats \
    --section MemoryWorkloadAnalysis --metrics smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__warps_active.avg.pct_of_peak_sustained_active \
    python3 bench/ncu_quantize.py $shape > $R/ncu_$shape.txt 2>&1
  echo "$shape rc=$?"
done
