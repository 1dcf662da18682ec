#!/usr/bin/env bash
# Session 26 call a4 (f32b659, the final library code): the scoreboard records (e2e / kernel /
# real / small, with heads) against cuDNN, FA2 and the reference in the same call.
set -u
O=$OUT/a4; mkdir -p $O /tmp/s26a4
timeout 330 bash bench/scoreboard_run.sh --out /tmp/s26a4/sb --build .dev --modes e2e,kernel,real,small --budget-s 280 > /tmp/s26a4/sb_run.log 2>&1
echo "scoreboard rc=$?" >> /tmp/s26a4/steps.txt
tail -5 /tmp/s26a4/sb_run.log
cp .scratch/s26/a4.sh /tmp/s26a4/run.sh
tar czf $O/a4.tgz -C /tmp s26a4
cat /tmp/s26a4/steps.txt
