#!/usr/bin/env bash
# Session 34 b4 (discovery, branch s34-unit-stats e40d731): why the in-kernel statistics stage is
# slower than main's at every length. Four builds, 3 rounds alternated at 6 shapes: base = main
# (aa0f941), new = e40d731, e1 = e40d731 with the final-word poll as a relaxed load (no
# ld.acquire, whose SASS invalidates the SM's L1: CCTL.IVALL), e2 = e40d731 with every K CTA
# waiting for quantize_v's grid before its statistics (as main's quantize_k does).
# (Note: .dev-base was not carried, so the base side failed to load — steps.txt rc=1; compare
# new, e1 and e2 with each other, main from b3 / b5.)
set -u
o=$OUT/b4; mkdir -p $o
STAGE_SHAPES=flux-1024,qwen2.5-7b-prefill-4k,bert-large-512,b4h32-hd128-1k,b4h32-hd128-8k,b4h32-hd64-32k \
  timeout 400 bash bench/stage_ab.sh $o 3 base=.dev-base new=.dev-new e1=.dev-e1 e2=.dev-e2 > $o/ab.log 2>&1
for v in new e1 e2; do
  echo "== base vs $v"; python3 bench/stage_compare.py "$o/stage_base_r*.jsonl" "$o/stage_${v}_r*.jsonl"
done | tee $o/compare.txt
cd $OUT && tar cJf b4.tar.xz b4 && rm -rf b4
