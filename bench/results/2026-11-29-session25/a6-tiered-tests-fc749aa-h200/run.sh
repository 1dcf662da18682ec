#!/usr/bin/env bash
# Session 25 call a6: fc749aa's GPU test binary (the tiered cases' shared first-call helper), its
# tiered-compile cases.
set -u
O=$OUT/a6; mkdir -p $O
timeout 200 .dev/tests/sage2_gpu_tests -tc="gpu tiered compile*" > $O/tiered.log 2>&1
echo "rc=$?" >> $O/tiered.log
cp .scratch/s25/a6.sh $O/run.sh
tail -4 $O/tiered.log; grep -B3 -A10 "ERROR" $O/tiered.log | head -30
