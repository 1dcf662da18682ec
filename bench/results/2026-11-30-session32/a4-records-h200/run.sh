#!/usr/bin/env bash
# Session 32 call a4 (5303a53 = main: channel_stats in clusters where they fit, else one CTA per
# head; its whole C++ GPU suite passed in a3): the quant records (3 stage_profile rounds, merged)
# and the scoreboard records (e2e / kernel / real / small, with heads) against cuDNN, FA2 and the
# reference in the same call.
set -u
O=/tmp/s32a4; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s32-nvcache SAGE2_TIERED_COMPILE=0
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
.dev-sb/tools/sage2-info --version > $O/version.txt 2>&1
cp .scratch/s32/a4.sh $O/run.sh
for r in 1 2 3; do
  PYTHONPATH=$PWD/python SAGE2_LIBRARY=$PWD/.dev-sb/libsage2.so timeout 100 python3 bench/stage_profile.py --shapes quant --rounds 1 --calls 3 --out $O/stage_r$r.jsonl > $O/stage_r$r.log 2>&1; t "stage r$r" $?
done
python3 bench/stage_profile.py --merge $O/stage_r1.jsonl $O/stage_r2.jsonl $O/stage_r3.jsonl --out $O/quant_final.jsonl > $O/merge.log 2>&1; t merge $?
tar czf $OUT/s32a4_q.tgz -C /tmp s32a4
timeout 330 bash bench/scoreboard_run.sh --out $O/sb --build .dev-sb --modes e2e,kernel,real,small --budget-s 280 > $O/sb_run.log 2>&1; t scoreboard $?
tail -5 $O/sb_run.log
tar czf $OUT/s32a4.tgz -C /tmp s32a4
