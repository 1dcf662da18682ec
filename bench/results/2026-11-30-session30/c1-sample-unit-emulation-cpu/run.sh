#!/usr/bin/env bash
# Session 30 c1 (CPU): the sampled statistics' accuracy by sample unit, on the CPU emulation.
# Unit 0 = the KV tile (bk: 64 for the mma configurations, 128 for wgmma), 64 and 32 keys; 4 units.
# Each row "…, sampled" against "…, today" (every key's statistics): bench/onepass_accuracy.py's table.
set -eu
for u in 0 64 32; do for n in 1024 2048; do
  python3 bench/onepass_accuracy.py --tool build/tools/sage2-accuracy --q-len $n --sample-unit $u \
    --json acc_u${u}_n${n}.json > acc_u${u}_n${n}.md  # (committed as acc_*.cells.xz)
done; done
