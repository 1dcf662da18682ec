#!/usr/bin/env bash
# Session 34 b5 (discovery, branch s34-unit-stats e40d731): is the in-kernel statistics stage slow
# because of its protocol or because of the kernels' new code? Three builds, 3 rounds alternated
# at 6 shapes: base = main (aa0f941), new = e40d731, e3 = e40d731 with kernels::quantize_stats_inline
# false (channel_stats runs and the new quantize_v / quantize_k take main's path through their code:
# the same protocol as base, the new kernels' registers, occupancy and code size).
set -u
o=$OUT/b5; mkdir -p $o
STAGE_SHAPES=flux-1024,qwen2.5-7b-prefill-4k,bert-large-512,b4h32-hd128-1k,b4h32-hd128-8k,b4h32-hd64-32k \
  timeout 300 bash bench/stage_ab.sh $o 3 base=.dev-base new=.dev-new e3=.dev-e3 > $o/ab.log 2>&1
for v in new e3; do
  echo "== base vs $v"; python3 bench/stage_compare.py "$o/stage_base_r*.jsonl" "$o/stage_${v}_r*.jsonl"
done | tee $o/compare.txt
cd $OUT && tar cJf b5.tar.xz b5 && rm -rf b5
