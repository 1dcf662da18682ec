#!/usr/bin/env bash
# Session 26 call a1 (the sampled statistics without arrivals or memset: quantize_q/k/v combine
# channel_stats' partials): the stage A/B against main's build (3 rounds alternated), then the
# whole C++ GPU suite on the new build (4 shards).
set -u
O=$OUT/a1; mkdir -p $O /tmp/s26a1
timeout 200 bash bench/stage_ab.sh /tmp/s26a1/ab 3 new=.dev base=.dev-base > /tmp/s26a1/ab.log 2>&1
echo "stage_ab rc=$?" >> /tmp/s26a1/steps.txt
python3 bench/stage_compare.py '/tmp/s26a1/ab/stage_base_r*.jsonl' '/tmp/s26a1/ab/stage_new_r*.jsonl' > /tmp/s26a1/compare.txt 2>&1
cat /tmp/s26a1/compare.txt
timeout 380 bash scripts/gpu_run.sh /tmp/s26a1/suite --bundle .dev --suite "" --shards 4 > /tmp/s26a1/gpu_run.log 2>&1
echo "gpu_run rc=$?" >> /tmp/s26a1/steps.txt
tail -15 /tmp/s26a1/gpu_run.log
cp .scratch/s26/a1.sh /tmp/s26a1/run.sh
tar czf $O/a1.tgz -C /tmp s26a1
cat /tmp/s26a1/steps.txt
