#!/usr/bin/env bash
# Session 35 c6 (experiment, not on main): quantize_v of the wgmma family at 12 chunks (hd 65-96)
# with 4 lanes x 3 chunks per row instead of 16 lanes with 4 idle. The GPU quantize test's d=80
# and d=96 cases (bits equal the reference) and the non-finite tests, then the stage A/B against
# .dev-sb (26e6642) at DiT (hd 72), ViT-H/14 (hd 80), hd 96 2K, 3 rounds.
set -u
o=$OUT/c6; mkdir -p $o
for d in "d=80" "d=96"; do
  SAGE2_TEST_QUANT_CASE="$d" timeout 150 .dev-v3/tests/sage2_gpu_tests -tc="gpu quantize: every variant*" > "$o/quant_$d.log" 2>&1
  echo "quantize test $d rc=$?"; tail -3 "$o/quant_$d.log"
done
timeout 120 .dev-v3/tests/sage2_gpu_tests -tc="gpu nonfinite*" > $o/nonfinite.log 2>&1; echo "nonfinite rc=$?"; tail -3 $o/nonfinite.log
STAGE_SHAPES=dit-xl-512,vit-h14-257,b4h16-hd96-2k timeout 150 bash bench/stage_ab.sh $o/ab 3 base=.dev-sb v3=.dev-v3 > $o/ab.log 2>&1
python3 bench/stage_compare.py "$o/ab/stage_base_r*.jsonl" "$o/ab/stage_v3_r*.jsonl" | tee $o/compare.txt
cd $OUT && tar cJf c6.tar.xz c6 && rm -rf c6
