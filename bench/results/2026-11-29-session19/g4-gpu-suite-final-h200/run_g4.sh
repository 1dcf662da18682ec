#!/usr/bin/env bash
# session 19 g4: the mma-attention seed of g3's failure on session 17's code (.dev-base), then the whole
# C++ GPU suite on the final code (.dev), then the quant stage (3 rounds).
cd "$(dirname "$0")/.."
O=/tmp/g4; rm -rf $O; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/g4-cc LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
start=$(date +%s)
SAGE2_TEST_SEED=1321732365004471016 timeout 70 .dev-base/tests/sage2_gpu_tests -tc='gpu attention: quantize + ΔS + mma*' > $O/seed_repro_base.log 2>&1
echo "repro base rc=$? t=$(( $(date +%s) - start ))"; grep -A3 "ERROR" $O/seed_repro_base.log | head -6; tail -3 $O/seed_repro_base.log
timeout 420 bash scripts/gpu_run.sh $O/suite --bundle .dev --suite "" --shards 4 > $O/gpu_run.log 2>&1
echo "suite rc=$? t=$(( $(date +%s) - start ))"; tail -6 $O/gpu_run.log
export PYTHONPATH=python SAGE2_LIBRARY=$PWD/.dev/libsage2.so
for r in 1 2 3; do
  timeout 40 python3 bench/stage_profile.py --shapes quant --rounds 1 --calls 3 --out $O/stage_r$r.jsonl > $O/stage_r$r.log 2>&1
  echo "stage r$r rc=$? t=$(( $(date +%s) - start ))"
done
python3 bench/stage_profile.py --merge $O/stage_r1.jsonl $O/stage_r2.jsonl $O/stage_r3.jsonl --out $O/quant_final.jsonl > $O/merge.log 2>&1; echo "merge rc=$?"
grep -h -A4 "round 1 flux\|round 1 b4h32-hd128-8k" $O/stage_r1.log
tar czf $OUT/g4.tgz -C /tmp g4
