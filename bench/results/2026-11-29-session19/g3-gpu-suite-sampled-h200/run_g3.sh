#!/usr/bin/env bash
# session 19 g3: the whole C++ GPU suite on the final sampled-stage code, then the quant stage (3 rounds).
cd "$(dirname "$0")/.."
O=/tmp/g3; rm -rf $O; mkdir -p $O
export CUDA_CACHE_PATH=/tmp/g3-cc
start=$(date +%s)
timeout 470 bash scripts/gpu_run.sh $O/suite --bundle .dev --suite "" --shards 4 > $O/gpu_run.log 2>&1
echo "suite rc=$? t=$(( $(date +%s) - start ))"; tail -8 $O/gpu_run.log
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} PYTHONPATH=python SAGE2_LIBRARY=$PWD/.dev/libsage2.so
for r in 1 2 3; do
  timeout 40 python3 bench/stage_profile.py --shapes quant --rounds 1 --calls 3 --out $O/stage_r$r.jsonl > $O/stage_r$r.log 2>&1
  echo "stage r$r rc=$? t=$(( $(date +%s) - start ))"
done
python3 bench/stage_profile.py --merge $O/stage_r1.jsonl $O/stage_r2.jsonl $O/stage_r3.jsonl --out $O/quant_final.jsonl > $O/merge.log 2>&1; echo "merge rc=$?"
tar czf $OUT/g3.tgz -C /tmp g3
