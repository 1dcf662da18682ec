#!/usr/bin/env bash
# Session 33 b3 (ffc728e = main: the causal start order + review mends; its whole C++ GPU suite
# passed in b2): the quant records (3 stage_profile rounds, merged) and the scoreboard records
# (e2e / kernel / real / small, with heads) against cuDNN, FA2 and the reference in the same call.
set -u
O=/tmp/s33b3; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s33-nvcache SAGE2_TIERED_COMPILE=0
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
PYTHONPATH=$PWD/python SAGE2_LIBRARY=$PWD/.dev-sb/libsage2.so python3 -c "import sage2; print(sage2.library_version(), sage2.build_commit())" > $O/version.txt 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $O/gpu.txt
for r in 1 2 3; do
  PYTHONPATH=$PWD/python SAGE2_LIBRARY=$PWD/.dev-sb/libsage2.so timeout 100 python3 bench/stage_profile.py --shapes quant --rounds 1 --calls 3 --out $O/stage_r$r.jsonl > $O/stage_r$r.log 2>&1; t "stage r$r" $?
done
python3 bench/stage_profile.py --merge $O/stage_r1.jsonl $O/stage_r2.jsonl $O/stage_r3.jsonl --out $O/quant_final.jsonl > $O/merge.log 2>&1; t merge $?
timeout 330 bash bench/scoreboard_run.sh --out $O/sb --build .dev-sb --modes e2e,kernel,real,small --budget-s 280 > $O/sb_run.log 2>&1; t scoreboard $?
tail -5 $O/sb_run.log
tar cJf $OUT/s33b3.tar.xz -C /tmp s33b3
