#!/usr/bin/env bash
# Session 27 call b3: kernel spans of one call at the encoder shapes (stage_profile.py).
set -u
O=/tmp/s27b3; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s27-nvcache PYTHONPATH=$PWD/python SAGE2_LIBRARY=$PWD/.dev/libsage2.so SAGE2_TIERED_COMPILE=0
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
.dev/tools/sage2-info --version > $O/version.txt 2>&1
timeout 150 python3 .scratch/s27/stages_enc.py --shapes "vit-h14-197,vit-l-257-hd80,bert-large-512,dit-xl-512,whisper-large-enc,b4h32-hd128-1k" --rounds 1 --calls 3 --out $O/stages.jsonl > $O/stages.log 2>&1; t stages $?
tar cf $OUT/s27b3.tar -C /tmp s27b3
