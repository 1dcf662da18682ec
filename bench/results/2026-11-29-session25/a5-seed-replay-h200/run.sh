#!/usr/bin/env bash
# Session 25 call a5: a4's failing case (the matrix test, int8 top_left d=64 N=1000 diffuse: cos
# 0.999894 < 0.9999) replayed with its base seed on main's test binary (751375d) and on 6166eec's.
set -u
O=$OUT/a5; mkdir -p $O
export SAGE2_TEST_SEED=3909105575576933049
for b in .dev-base .dev; do
  timeout 250 $b/tests/sage2_gpu_tests -tc="gpu attention: matrix vs emulation*" > $O/$(basename $b).log 2>&1 &
done
wait
grep -h "d=64 q=1000 kv=1000 gqa=1 diffuse\|Status\|assertions" $O/*.log
cp .scratch/s25/a5.sh $O/run.sh
