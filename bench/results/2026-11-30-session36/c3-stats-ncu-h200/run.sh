#!/usr/bin/env bash
# Session 36 c3 (discovery): channel_stats under ncu --set full, main's walk (34cc008, .dev-sb)
# against branch s36-stats-units (2150ebe, .dev: every unit at once, 512-thread CTAs), at the shapes
# where the units form lost (BERT-large 512, ViT-B/16: many heads) and won (B4 H32 hd 128 1K).
set -u
o=$OUT/c3; mkdir -p $o
export PYTHONPATH=$PWD/python
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $o/gpu.txt
for s in bert-large-512 vit-b16-197 b4h32-hd128-1k; do
  for v in base units; do
    case $v in
      base) lib=$PWD/.dev-sb/libsage2.so;;
      units) lib=$PWD/.dev/libsage2.so;;
    esac
    t0=$(date +%s)
    env SAGE2_LIBRARY=$lib timeout 120 ncu --set full --import-source no \
      -k regex:"sage2_channel_stats" --launch-skip 2 --launch-count 1 -o $o/ncu_${s}_$v -f \
      python3 bench/ncu_quantize.py $s > $o/ncu_${s}_$v.log 2>&1
    ncu -i $o/ncu_${s}_$v.ncu-rep --page details --csv > $o/ncu_${s}_$v.details.csv 2>/dev/null
    ncu -i $o/ncu_${s}_$v.ncu-rep --page source --print-source sass --csv > $o/ncu_${s}_$v.sass.csv 2>/dev/null
    echo "== $s $v ($(( $(date +%s) - t0 )) s)"
    ncu -i $o/ncu_${s}_$v.ncu-rep --print-summary per-kernel 2>/dev/null | grep -E "Duration|DRAM Throughput|Registers|Achieved Occ|Theoretical Occ|Waves|Grid Size|Block Size|Executed Ipc A|Dynamic Shared" | head -14
  done
done
rm -f $o/*.ncu-rep
cd $OUT && tar cJf c3.tar.xz c3 && rm -rf c3
