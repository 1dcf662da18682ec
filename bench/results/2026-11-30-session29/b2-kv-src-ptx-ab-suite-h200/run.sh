#!/usr/bin/env bash
# Session 29 call b2: (1) A/B through PTX (sm_80 / sm_89, e2e, 3 rounds alternated): 120be65
# (.dev-base, main) vs 7769f30 (.dev: the K / V̂ copy sources once a pass); (2) the whole C++ GPU
# suite on 7769f30.
set -u
O=$OUT/b2; W=/tmp/s29b2; mkdir -p $O $W
start=$(date +%s)
OUT=$W bash .scratch/s29/ptx_ab.sh
echo "ptx_ab done at $(( $(date +%s) - start )) s" >> $W/steps.txt
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv >> $W/steps.txt
bash scripts/gpu_run.sh $W/suite --bundle .dev --suite "" --shards 4 > $W/suite.log 2>&1; echo "suite rc=$?" >> $W/steps.txt
echo "all done at $(( $(date +%s) - start )) s" >> $W/steps.txt
cp .scratch/s29/b2.sh $W/run.sh
tail -6 $W/suite.log; cat $W/steps.txt
tar czf $O/b2.tgz -C /tmp s29b2
