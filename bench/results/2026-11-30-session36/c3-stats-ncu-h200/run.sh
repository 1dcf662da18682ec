#!/usr/bin/env bash
# Session 36 c3 (discovery): channel_stats under ncu --set full, main's walk (34cc008, .dev-sb)
# against branch s36-stats-units (2150ebe, .dev: every unit at once, 512-thread CTAs), at the shapes
# where the units form lost (BERT-large 512, ViT-B/16: many heads) and won (B4 H32 hd 128 1K).
# (Run with the capture loop inline; scripts/ncu_capture.sh holds it since.)
set -u
o=$OUT/c3; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $o/gpu.txt
for s in bert-large-512 vit-b16-197 b4h32-hd128-1k; do
  bash scripts/ncu_capture.sh $o/ncu_${s}_base $PWD/.dev-sb/libsage2.so sage2_channel_stats $s
  bash scripts/ncu_capture.sh $o/ncu_${s}_units $PWD/.dev/libsage2.so sage2_channel_stats $s
done
cd $OUT && tar cJf c3.tar.xz c3 && rm -rf c3
