#!/usr/bin/env bash
# session 18 w: reproduce g2's wgmma-vs-emulation miss with its seed, on this code and on .dev-base (older code).
cd "$(dirname "$0")/.."
export CUDA_CACHE_PATH=/tmp/w-cc
for b in .dev .dev-base; do
  s=$(date +%s)
  SAGE2_TEST_SEED=8511178200839985487 timeout 150 $b/tests/sage2_gpu_tests -tc='gpu wgmma: quantize + *' > /tmp/w_$(basename $b).log 2>&1
  echo "$b rc=$? $(( $(date +%s) - s ))s"; grep -A3 "ERROR" /tmp/w_$(basename $b).log | head -8; grep "Nq=3000 Nk=128 d=128 f16 NHD top_left" /tmp/w_$(basename $b).log | cut -c1-200
done
