#!/usr/bin/env bash
# 3 rounds, builds alternated: base (.dev-base) and new (.dev), each arch in its own process.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
for r in 1 2 3; do
  for tag in base new; do
    dir=.dev; [ $tag = base ] && dir=.dev-base
    for arch in sm_80 sm_89; do
      PYTHONPATH=$PWD/python SAGE2_LIBRARY=$PWD/$dir/libsage2.so SAGE2_CACHE_DIR=/tmp/c-$tag SAGE2_TARGET_ARCH=$arch \
        timeout 200 python3 .scratch/s29/ptx_ab.py --out "$OUT/ptx_ab.jsonl" --tag $tag --round $r >> "$OUT/ptx_ab.log" 2>&1 || echo "fail $tag $arch $r"
    done
  done
done
