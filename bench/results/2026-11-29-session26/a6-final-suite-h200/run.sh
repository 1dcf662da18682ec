#!/usr/bin/env bash
# Session 26 call a6 (the final code: f32b659's library + the reference's sampled sum order): the
# two failing quantize cases at their seeds, then the whole C++ GPU suite (4 shards).
set -u
O=$OUT/a6; mkdir -p $O /tmp/s26a6
SAGE2_TEST_SEED=2325824428229224664 SAGE2_TEST_QUANT_CASE="N=2048 d=96 HND gqa=1 int8 f16 sq0 sk1 sv1 mma biased pv16 v*1 spike 300" \
  timeout 100 .dev/tests/sage2_gpu_tests -tc="gpu quantize: every variant*" > /tmp/s26a6/seed_a3.log 2>&1
echo "seed_a3 rc=$?" >> /tmp/s26a6/steps.txt
SAGE2_TEST_SEED=18017553419872783794 SAGE2_TEST_QUANT_CASE="N=4096 d=128 HND gqa=1 int8 f16 sq0 sk1 sv1 mma biased pv16 v*1 spike 0" \
  timeout 100 .dev/tests/sage2_gpu_tests -tc="gpu quantize: every variant*" > /tmp/s26a6/seed_a1.log 2>&1
echo "seed_a1 rc=$?" >> /tmp/s26a6/steps.txt
timeout 380 bash scripts/gpu_run.sh /tmp/s26a6/suite --bundle .dev --suite "" --shards 4 > /tmp/s26a6/gpu_run.log 2>&1
echo "gpu_run rc=$?" >> /tmp/s26a6/steps.txt
tail -6 /tmp/s26a6/gpu_run.log
cp .scratch/s26/a6.sh /tmp/s26a6/run.sh
tar czf $O/a6.tgz -C /tmp s26a6
cat /tmp/s26a6/steps.txt
