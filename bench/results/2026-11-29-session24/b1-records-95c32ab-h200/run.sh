#!/usr/bin/env bash
# Session 24 call b1: the final code's e2e / kernel / real / small / heads records (95c32ab).
set -u
O=$OUT/b1; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s24b1-nvcache
mkdir -p /tmp/s24b1; timeout 330 bash bench/scoreboard_run.sh --out /tmp/s24b1/sb --build .dev --modes e2e,kernel,real,small --budget-s 280 > /tmp/s24b1/sb_run.log 2>&1
echo "scoreboard rc=$?" >> $O/steps.txt
tar czf $O/sb.tgz -C /tmp s24b1
tail -5 /tmp/s24b1/sb_run.log
cp .scratch/s24/b1.sh $O/run.sh
