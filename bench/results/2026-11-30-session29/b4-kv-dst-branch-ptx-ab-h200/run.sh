#!/usr/bin/env bash
# Session 29 call b4: (1) A/B through PTX (sm_80 / sm_89, e2e, 3 rounds alternated): 120be65
# (.dev-base, main) vs 6ff8d7a (.dev: + the kept shared-memory destinations); (2) the whole C++ GPU
# suite on 6ff8d7a.
set -u
O=$OUT/b4; W=/tmp/s29b4; mkdir -p $O $W
start=$(date +%s)
OUT=$W bash .scratch/s29/ptx_ab.sh
echo "ptx_ab done at $(( $(date +%s) - start )) s" >> $W/steps.txt
cp $W/ptx_ab.jsonl $O/  # back even if the suite runs out of time
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv >> $W/steps.txt
timeout 330 bash scripts/gpu_run.sh $W/suite --bundle .dev --suite "" --shards 4 > $W/suite.log 2>&1; echo "suite rc=$?" >> $W/steps.txt
echo "all done at $(( $(date +%s) - start )) s" >> $W/steps.txt
cp .scratch/s29/b4.sh $W/run.sh
tail -6 $W/suite.log; cat $W/steps.txt
tar czf $O/b4.tgz -C /tmp s29b4
