#!/usr/bin/env bash
# Session 33 b2: the whole C++ GPU suite on ffc728e (the causal start order + session 32's review
# mends), then ncu of channel_stats at B 4 H 32 hd 128 1K and at Flux (why ~12 µs whatever the form).
set -u
bash scripts/gpu_run.sh $OUT/b2 --bundle .dev --suite "" --shards 4 > $OUT/b2_suite.txt 2>&1
tail -n 30 $OUT/b2_suite.txt
o=$OUT/b2; mkdir -p $o
export PYTHONPATH=$PWD/python SAGE2_LIBRARY=$PWD/.dev/libsage2.so
for s in b4h32-hd128-1k flux-1024; do
  timeout 120 ncu --set full --import-source no -k regex:"sage2_channel_stats" --launch-skip 1 --launch-count 1 -o $o/ncu_stats_$s -f python3 bench/ncu_quantize.py $s > $o/ncu_stats_$s.log 2>&1
  ncu -i $o/ncu_stats_$s.ncu-rep --page details --csv > $o/ncu_stats_$s.details.csv 2>/dev/null
  ncu -i $o/ncu_stats_$s.ncu-rep --page source --print-source sass --csv > $o/ncu_stats_$s.sass.csv 2>/dev/null
  ncu -i $o/ncu_stats_$s.ncu-rep --print-summary per-kernel 2>/dev/null | grep -E "sage2_|Duration|Elapsed Cycles|DRAM Throughput|Registers|Achieved Occ|Waves|Grid Size|Block Size|Cluster" | head -30
done
rm -f $o/*.ncu-rep
cd $OUT && tar cJf b2.tar.xz b2 b2_suite.txt && rm -rf b2 b2_suite.txt
