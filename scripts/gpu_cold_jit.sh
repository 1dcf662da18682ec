#!/usr/bin/env bash
# On the GPU machine: the cold first call at several head dims (issue 34: <= 1 s each), each in a
# fresh process on an empty kernel cache, then again in a second process on that cache (disk hit).
#   bash scripts/gpu_cold_jit.sh OUT [BUILD=.dev] [HEAD_DIMS="72 136 200 320"]
# Writes OUT/cold_jit.jsonl: one sage2-bench-jit --first-call record per process (its kernels, each
# with its source and load time) plus fields "cache" ("empty" | "warm") and "commit".
set -euo pipefail
OUT=${1:?usage: gpu_cold_jit.sh OUT [BUILD] [HEAD_DIMS]}
BUILD=${2:-.dev}
DIMS=${3:-72 136 200 320}
mkdir -p "$OUT"
commit=$("$BUILD/tools/sage2-info" --version 2>/dev/null | awk '/commit/{print $NF}' | head -1)
for d in $DIMS; do
  dir=$(mktemp -d /tmp/sage2-cold-XXXXXX)
  for cache in empty warm; do
    line=$("$BUILD/bench/sage2-bench-jit" --cache-dir "$dir" --first-call "$d")
    echo "${line%\}}, \"cache\": \"$cache\", \"commit\": \"$commit\"}" | tee -a "$OUT/cold_jit.jsonl"
  done
  rm -rf "$dir"
done
