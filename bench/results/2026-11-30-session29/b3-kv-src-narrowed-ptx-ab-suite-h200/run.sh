#!/usr/bin/env bash
# Session 29 call b3: (1) A/B through PTX (sm_80 / sm_89, e2e, 3 rounds alternated): 120be65
# (.dev-base, main) vs 216094e (.dev: the kept K / V̂ sources, not where a kernel sits at its register line); (2) the whole C++ GPU
# suite on 216094e.
set -u
O=$OUT/b3; W=/tmp/s29b3; mkdir -p $O $W
start=$(date +%s)
OUT=$W bash .scratch/s29/ptx_ab.sh
echo "ptx_ab done at $(( $(date +%s) - start )) s" >> $W/steps.txt
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv >> $W/steps.txt
bash scripts/gpu_run.sh $W/suite --bundle .dev --suite "" --shards 4 > $W/suite.log 2>&1; echo "suite rc=$?" >> $W/steps.txt
echo "all done at $(( $(date +%s) - start )) s" >> $W/steps.txt
cp .scratch/s29/b3.sh $W/run.sh
tail -6 $W/suite.log; cat $W/steps.txt
tar czf $O/b3.tgz -C /tmp s29b3
