#!/usr/bin/env bash
# s32 a2 (discovery): the quantize stage's kernels at short shapes, main's library (.dev-base = edbfadd):
# kernel spans under CUDA-graph replay (no host gaps), and ncu of quantize_k / quantize_v.
set -u
o=$OUT/a2; mkdir -p $o
export PYTHONPATH=$PWD/python SAGE2_LIBRARY=$PWD/.dev-base/libsage2.so
timeout 120 python3 .scratch/s32/graph_profile.py qwen2.5-7b-prefill-4k whisper-large-enc b4h32-hd128-1k flux-1024 bert-large-512 > $o/graph_spans.txt 2>&1
cat $o/graph_spans.txt | cut -c1-400
for s in qwen2.5-7b-prefill-4k whisper-large-enc b4h32-hd128-1k; do
  timeout 150 ncu --set full --import-source no -k regex:"sage2_quantize_(k|v)" --launch-skip 4 --launch-count 2 -o $o/ncu_$s -f python3 bench/ncu_quantize.py $s > $o/ncu_$s.log 2>&1
  ncu -i $o/ncu_$s.ncu-rep --page details --csv > $o/ncu_$s.details.csv 2>/dev/null
  ncu -i $o/ncu_$s.ncu-rep --page source --print-source sass --csv > $o/ncu_$s.sass.csv 2>/dev/null
  ncu -i $o/ncu_$s.ncu-rep --print-summary per-kernel 2>/dev/null | grep -E "sage2_|Duration|Elapsed Cycles|DRAM Throughput|Registers|Achieved Occ|Waves" | head -30
done
cd $OUT && tar czf a2.tgz a2 && rm -rf a2/*.ncu-rep
