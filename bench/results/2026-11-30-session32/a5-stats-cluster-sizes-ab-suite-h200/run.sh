#!/usr/bin/env bash
# s32 a5: channel_stats in clusters of 4, 2 or none (s32-stats-cluster-sizes) against main 5303a53:
# stage A/B (3 rounds alternated), then the whole C++ GPU suite on the branch.
set -u
o=$OUT/a5; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $o/gpu.txt 2>&1
bash bench/stage_ab.sh $o/ab 3 base=.dev-base new=.dev
python3 bench/stage_compare.py "$o/ab/stage_base_r*.jsonl" "$o/ab/stage_new_r*.jsonl" > $o/ab/compare.txt 2>&1
tail -40 $o/ab/compare.txt
(cd $OUT && tar czf a5-ab.tgz a5/ab)
bash scripts/gpu_run.sh $o/suite --bundle .dev --suite "" --shards 4 > $o/suite.log 2>&1; echo "suite rc=$?" | tee -a $o/steps.txt
tail -15 $o/suite.log
(cd $OUT && tar czf a5-suite.tgz a5/suite a5/*.txt)
cp $o/suite.log $OUT/a5-suite.log; rm -rf $o
