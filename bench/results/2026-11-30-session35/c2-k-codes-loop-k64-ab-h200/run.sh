#!/usr/bin/env bash
# Session 35 c2: quantize_k's codes in one straight loop (n1) and, beside it, the wgmma family's K
# at 64 registers (n2: 4 CTAs of 256 where it took 3), against main (base = f425fb4's library,
# 6890513); 3 rounds alternated at the 18 `quant` shapes.
set -u
o=$OUT/c2; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $o/gpu.txt
timeout 420 bash bench/stage_ab.sh $o 3 base=.dev-base n1=.dev-n1 n2=.dev-n2 > $o/ab.log 2>&1
for v in n1 n2; do
  echo "== base vs $v"; python3 bench/stage_compare.py "$o/stage_base_r*.jsonl" "$o/stage_${v}_r*.jsonl"
done | tee $o/compare.txt
echo "== n1 vs n2"; python3 bench/stage_compare.py "$o/stage_n1_r*.jsonl" "$o/stage_n2_r*.jsonl" | tee -a $o/compare.txt
cd $OUT && tar cJf c2.tar.xz c2 && rm -rf c2
