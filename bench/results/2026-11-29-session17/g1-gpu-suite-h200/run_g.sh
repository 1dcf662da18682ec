#!/usr/bin/env bash
# session 17 g: the whole C++ GPU suite on the final device code (a6d6c0d, .dev), then two stage_profile rounds (quant records).
cd "$(dirname "$0")/.."
O=/tmp/g; rm -rf $O; mkdir -p $O
export PYTHONPATH=python SAGE2_LIBRARY=$PWD/.dev/libsage2.so
start=$(date +%s)
timeout 520 bash scripts/gpu_run.sh $O/suite --bundle .dev --suite "" --shards 3 > $O/gpu_run.log 2>&1
echo "suite rc=$? t=$(( $(date +%s) - start ))"
tail -12 $O/gpu_run.log
for r in 1 2; do
  timeout 40 python3 bench/stage_profile.py --shapes quant --rounds 1 --calls 3 --out $O/stage_r$r.jsonl > $O/stage_r$r.log 2>&1
  echo "stage r$r rc=$? t=$(( $(date +%s) - start ))"
done
tar czf $OUT/g.tgz -C /tmp g
