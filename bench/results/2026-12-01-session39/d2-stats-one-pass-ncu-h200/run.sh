#!/usr/bin/env bash
# Session 39 d2 (discovery): channel_stats' one-pass walk (5faedd7, .dev) under ncu --set full at
# BERT-large 512 and ViT-B/16, where d1 measured it no faster / 15 % faster than the chunk walk
# (whose profiles at these shapes are session 36's c3 `_base`).
set -u
o=$OUT/d2; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $o/gpu.txt
for s in bert-large-512 vit-b16-197; do
  bash scripts/ncu_capture.sh $o/ncu_${s}_onepass $PWD/.dev/libsage2.so sage2_channel_stats $s
done
cd $OUT && tar cJf d2.tar.xz d2 && rm -rf d2
