#!/usr/bin/env bash
# Session 34 b6 (discovery): a timing proxy of the one-round-trip readiness design (bench/NOTES.md,
# session 34): e4 = branch e40d731 + e4_on_e40d731.diff, where a waiting CTA loads the head's
# statistics beside its final word in the same step (formally racy: timing only) and polls only
# when the word is not final yet. Its quantize_v spills 100-120 bytes (the CPU spill test fails on
# it), so only quantize_k's numbers are a fair proxy. Against main (aa0f941), 3 rounds alternated
# at 6 shapes.
set -u
o=$OUT/b6; mkdir -p $o
STAGE_SHAPES=flux-1024,qwen2.5-7b-prefill-4k,bert-large-512,b4h32-hd128-1k,b4h32-hd128-8k,b4h32-hd64-32k \
  timeout 200 bash bench/stage_ab.sh $o 3 base=.dev-base e4=.dev-e4 > $o/ab.log 2>&1
python3 bench/stage_compare.py "$o/stage_base_r*.jsonl" "$o/stage_e4_r*.jsonl" | tee $o/compare.txt
cd $OUT && tar cJf b6.tar.xz b6 && rm -rf b6
