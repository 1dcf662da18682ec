#!/usr/bin/env bash
# Session 39 d4: the scoreboard records (e2e / kernel / real / small, with heads) of e190d8e (the
# one-pass channel_stats walk; its stage A/B, `quant` records and whole C++ GPU suite ran in d3)
# against cuDNN, FA2 and the reference in the same call, from the full bundle .dev.
set -u
[[ -d .anchors-ref ]] || tar xJf .scratch/anchors.tar.xz
T=${RECORDS_TAG:-s39d4}; O=/tmp/$T; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/$T-nvcache SAGE2_TIERED_COMPILE=0
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
PYTHONPATH=$PWD/python SAGE2_LIBRARY=$PWD/.dev/libsage2.so python3 -c "import sage2; print(sage2.library_version(), sage2.build_commit())" > $O/version.txt 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $O/gpu.txt
timeout 400 bash bench/scoreboard_run.sh --out $O/sb --build .dev --modes e2e,kernel,real,small --budget-s 330 > $O/sb_run.log 2>&1; t scoreboard $?
tail -5 $O/sb_run.log
tar cJf $OUT/$T.tar.xz -C /tmp $T
