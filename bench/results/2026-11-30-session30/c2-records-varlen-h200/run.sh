#!/usr/bin/env bash
# Session 30 call c2 (the final library code = 788f7b2's quantize and attention code; python/ of
# 5a59d98): the varlen Python tests (c1's failure mended), the quant records (3 stage_profile rounds, merged) and the scoreboard records (e2e /
# kernel / real / small, with heads) against cuDNN, FA2 and the reference in the same call.
set -u
O=/tmp/s30c2; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/s30-nvcache SAGE2_TIERED_COMPILE=0
t() { echo "[$(date +%T)] $1 rc=$2" | tee -a $O/steps.txt; }
.dev-sb/tools/sage2-info --version > $O/version.txt 2>&1
cp .scratch/s30/c2.sh $O/run.sh
# c1's one failure, re-run with its mended test (python/tests/test_gpu_varlen.py, the tree's python/ and this library)
(cd python && SAGE2_REQUIRE_GPU_TESTS=1 SAGE2_LIBRARY=$PWD/../.dev-sb/libsage2.so PYTHONPATH=$PWD timeout 150 python3 -m pytest -q tests/test_gpu_varlen.py > $O/varlen.log 2>&1); t varlen_tests $?
tail -3 $O/varlen.log
for r in 1 2 3; do
  PYTHONPATH=$PWD/python SAGE2_LIBRARY=$PWD/.dev-sb/libsage2.so timeout 100 python3 bench/stage_profile.py --shapes quant --rounds 1 --calls 3 --out $O/stage_r$r.jsonl > $O/stage_r$r.log 2>&1; t "stage r$r" $?
done
python3 bench/stage_profile.py --merge $O/stage_r1.jsonl $O/stage_r2.jsonl $O/stage_r3.jsonl --out $O/quant_final.jsonl > $O/merge.log 2>&1; t merge $?
timeout 330 bash bench/scoreboard_run.sh --out $O/sb --build .dev-sb --modes e2e,kernel,real,small --budget-s 280 > $O/sb_run.log 2>&1; t scoreboard $?
tail -5 $O/sb_run.log
tar czf $OUT/s30c2.tgz -C /tmp s30c2
