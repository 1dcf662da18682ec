#!/usr/bin/env bash
# Session 37 c2 (discovery): quantize_k under ncu --set full, main's CTA-wide form (48a4059,
# .dev-sb) against the warp-group form (055d9a0, .dev), where it lost (B4 H32 hd 128 8K: 1.3x
# slower) and won (B4 H32 hd 64 1K, Qwen prefill 4K).
set -u
o=$OUT/c2; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $o/gpu.txt
for s in b4h32-hd128-8k b4h32-hd64-1k; do
  bash scripts/ncu_capture.sh $o/ncu_${s}_base $PWD/.dev-sb/libsage2.so sage2_quantize_k $s
  bash scripts/ncu_capture.sh $o/ncu_${s}_new $PWD/.dev/libsage2.so sage2_quantize_k $s
done
cd $OUT && tar cJf c2.tar.xz c2 && rm -rf c2
