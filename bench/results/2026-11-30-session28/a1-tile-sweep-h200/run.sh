#!/usr/bin/env bash
# Every wgmma candidate tile timed (sage2-autotune --no-db) at the encoder and model shapes.
set -u
B=${BUNDLE:-.dev}
out=${OUT:-/tmp/out}/sweep; mkdir -p "$out"
export SAGE2_CACHE_DIR=/tmp/s2cache
run() { name=$1; shift
  timeout 120 $B/tools/sage2-autotune --device 0 --no-db --no-progress --reps 30 --report "$out/$name.json" "$@" > "$out/$name.txt" 2>&1
  echo "$name rc=$?"; }
run bert    --head-dims 64  --dtypes f16  --causal none --seq-lens 512  --batch 32 --heads 16
run vit     --head-dims 64  --dtypes f16  --causal none --seq-lens 197  --batch 64 --heads 12
run whisper --head-dims 64  --dtypes f16  --causal none --seq-lens 1500 --batch 4  --heads 20
run dit     --head-dims 72  --dtypes f16  --causal none --seq-lens 1024 --batch 8  --heads 16
run sdxl    --head-dims 64  --dtypes f16  --causal none --seq-lens 4096 --batch 2  --heads 10
run flux    --head-dims 128 --dtypes bf16 --causal none --seq-lens 4608 --batch 1  --heads 24
run qwen    --head-dims 128 --dtypes bf16 --causal top-left --seq-lens 4096 --batch 1 --heads 28 --kv-heads 4
run hd128   --head-dims 128 --dtypes f16  --causal none,top-left --seq-lens 1024,2048 --batch 4 --heads 32
run hd64    --head-dims 64  --dtypes f16  --causal none,top-left --seq-lens 1024,2048 --batch 4 --heads 32
