#!/usr/bin/env bash
# Session 29 call b1: (1) A/B through PTX (sm_80 / sm_89, e2e, 3 rounds alternated): main f5d2fa4
# (.dev-base) vs the tensor-core row sum 120be65 (.dev); (2) the whole C++ GPU suite on 120be65,
# beside (3) the Python suite from main's installed wheel (SAGE2_REQUIRE_GPU_TESTS=1, integrations).
set -u
O=$OUT/b1; W=/tmp/s29b1; mkdir -p $O $W
start=$(date +%s)
OUT=$W bash .scratch/s29/ptx_ab.sh
echo "ptx_ab done at $(( $(date +%s) - start )) s" >> $W/steps.txt
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv >> $W/steps.txt
(bash scripts/gpu_run.sh $W/suite --bundle .dev --suite "" --shards 4 > $W/suite.log 2>&1; echo "suite rc=$?" >> $W/steps.txt) &
timeout 480 bash scripts/gpu_integrations.sh $W/py --wheel wheelhouse/sage2-0.1.0-py3-none-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl > $W/py.log 2>&1
echo "python rc=$? at $(( $(date +%s) - start )) s" >> $W/steps.txt
wait
echo "all done at $(( $(date +%s) - start )) s" >> $W/steps.txt
cp .scratch/s29/b1.sh $W/run.sh
tail -5 $W/suite.log; tail -3 $W/py.log; cat $W/steps.txt
tar czf $O/b1.tgz -C /tmp s29b1
