#!/usr/bin/env bash
# Session 25 call a2 (branch at a8f0c87): the C++ GPU suite's shards 0 and 2 again (they failed one
# case each in a1, whose logs did not come back), beside the Python suite from the installed wheel
# (SAGE2_REQUIRE_GPU_TESTS=1, with the integrations' wheels).
set -u
O=$OUT/a2; mkdir -p $O /tmp/s25a2
n=52 per=13
for k in 0 2; do
  timeout 540 .dev/tests/sage2_gpu_tests --first=$((k * per + 1)) --last=$(((k + 1) * per)) > /tmp/s25a2/gpu_suite_shard$k.log 2>&1 &
done
timeout 540 bash scripts/gpu_integrations.sh /tmp/s25a2/py --wheel wheelhouse/sage2-0.1.0-py3-none-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl > /tmp/s25a2/py.log 2>&1
echo "python rc=$?" >> /tmp/s25a2/steps.txt
wait
for k in 0 2; do tail -3 /tmp/s25a2/gpu_suite_shard$k.log; grep -B2 -A12 "ERROR" /tmp/s25a2/gpu_suite_shard$k.log | head -60; done
tail -3 /tmp/s25a2/py.log; cat /tmp/s25a2/py/summary.txt 2>/dev/null | tail -5
cp .scratch/s25/a2.sh /tmp/s25a2/run.sh
tar czf $O/a2.tgz -C /tmp s25a2
