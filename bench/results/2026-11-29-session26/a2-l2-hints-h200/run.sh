#!/usr/bin/env bash
# Session 26 call a2 (L2 eviction priorities in the sampled split stage): the stage A/B against
# main's build (3 rounds alternated); then a1's failing quantize seed (18017553419872783794, smooth-V
# FP16-V̂ sampled cases) replayed on main's test binary.
set -u
O=$OUT/a2; mkdir -p $O /tmp/s26a2
timeout 200 bash bench/stage_ab.sh /tmp/s26a2/ab 3 new=.dev base=.dev-base > /tmp/s26a2/ab.log 2>&1
echo "stage_ab rc=$?" >> /tmp/s26a2/steps.txt
python3 bench/stage_compare.py '/tmp/s26a2/ab/stage_base_r*.jsonl' '/tmp/s26a2/ab/stage_new_r*.jsonl' > /tmp/s26a2/compare.txt 2>&1
cat /tmp/s26a2/compare.txt
SAGE2_TEST_SEED=18017553419872783794 timeout 200 .dev-base/tests/sage2_gpu_tests -tc="gpu quantize: every variant*" > /tmp/s26a2/seed_base.log 2>&1
echo "seed_base rc=$?" >> /tmp/s26a2/steps.txt
grep -B2 -A6 "ERROR" /tmp/s26a2/seed_base.log | head -40; tail -3 /tmp/s26a2/seed_base.log
cp .scratch/s26/a2.sh /tmp/s26a2/run.sh
tar czf $O/a2.tgz -C /tmp s26a2
cat /tmp/s26a2/steps.txt
