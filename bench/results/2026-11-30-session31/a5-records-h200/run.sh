#!/usr/bin/env bash
# Session 31 call a5 (104a6bf: the library code of edbfadd, whose whole C++ GPU suite passed in
# a3): the quant records (3 stage_profile rounds, merged) and the scoreboard records (e2e / kernel
# / real / small, with heads) against cuDNN, FA2 and the reference in the same call; then ncu of
# the attention kernel at hd 128 1K, Auto (Q quantized in the kernel) and split, with source counters.
set -u
O=/tmp/s31a5; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s31-nvcache SAGE2_TIERED_COMPILE=0
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
.dev-sb/tools/sage2-info --version > $O/version.txt 2>&1
cp .scratch/s31/a5.sh $O/run.sh
for r in 1 2 3; do
  PYTHONPATH=$PWD/python SAGE2_LIBRARY=$PWD/.dev-sb/libsage2.so timeout 100 python3 bench/stage_profile.py --shapes quant --rounds 1 --calls 3 --out $O/stage_r$r.jsonl > $O/stage_r$r.log 2>&1; t "stage r$r" $?
done
python3 bench/stage_profile.py --merge $O/stage_r1.jsonl $O/stage_r2.jsonl $O/stage_r3.jsonl --out $O/quant_final.jsonl > $O/merge.log 2>&1; t merge $?
tar czf $OUT/s31a5_q.tgz -C /tmp s31a5
timeout 330 bash bench/scoreboard_run.sh --out $O/sb --build .dev-sb --modes e2e,kernel,real,small --budget-s 280 > $O/sb_run.log 2>&1; t scoreboard $?
tail -5 $O/sb_run.log
tar czf $OUT/s31a5.tgz -C /tmp s31a5
export PYTHONPATH=$PWD/python SAGE2_LIBRARY=$PWD/.dev-sb/libsage2.so
for p in auto split; do
  SAGE2_QUANT_PATH=$p timeout 60 ncu --set full --import-source no -k regex:sage2_attention_wgmma --launch-skip 2 -c 1 -o $O/ncu_$p -f python3 bench/ncu_attention.py sage2 128 1024 0 > $O/ncu_$p.log 2>&1; t "ncu $p" $?
  ncu -i $O/ncu_$p.ncu-rep --page details > $O/ncu_$p.txt 2>&1
  ncu -i $O/ncu_$p.ncu-rep --page source --print-source sass --csv > $O/ncu_${p}_sass.csv 2>&1; t "sass $p" $?
done
tar czf $OUT/s31a5_n.tgz -C /tmp s31a5/ncu_auto.txt s31a5/ncu_split.txt s31a5/ncu_auto_sass.csv s31a5/ncu_split_sass.csv s31a5/steps.txt
