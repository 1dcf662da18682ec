#!/usr/bin/env bash
# Session 26 call a3 (f32b659: the L2 eviction priorities of the sampled stage where K + V fit twice the L2;
# against main): the stage A/B against main's build (3 rounds alternated), then the
# whole C++ GPU suite on the new build (4 shards).
set -u
O=$OUT/a3; mkdir -p $O /tmp/s26a3
timeout 200 bash bench/stage_ab.sh /tmp/s26a3/ab 3 new=.dev base=.dev-base > /tmp/s26a3/ab.log 2>&1
echo "stage_ab rc=$?" >> /tmp/s26a3/steps.txt
python3 bench/stage_compare.py '/tmp/s26a3/ab/stage_base_r*.jsonl' '/tmp/s26a3/ab/stage_new_r*.jsonl' > /tmp/s26a3/compare.txt 2>&1
cat /tmp/s26a3/compare.txt
timeout 380 bash scripts/gpu_run.sh /tmp/s26a3/suite --bundle .dev --suite "" --shards 4 > /tmp/s26a3/gpu_run.log 2>&1
echo "gpu_run rc=$?" >> /tmp/s26a3/steps.txt
tail -15 /tmp/s26a3/gpu_run.log
cp .scratch/s26/a3.sh /tmp/s26a3/run.sh
tar czf $O/a3.tgz -C /tmp s26a3
cat /tmp/s26a3/steps.txt
