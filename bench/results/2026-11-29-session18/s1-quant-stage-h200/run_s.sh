#!/usr/bin/env bash
# session 18 s: three stage_profile rounds of the quant group on the final code (.dev), merged into quant records.
cd "$(dirname "$0")/.."
O=/tmp/s; rm -rf $O; mkdir -p $O
export PYTHONPATH=python SAGE2_LIBRARY=$PWD/.dev/libsage2.so LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
start=$(date +%s)
for r in 1 2 3; do
  timeout 100 python3 bench/stage_profile.py --shapes quant --rounds 1 --calls 3 --out $O/stage_r$r.jsonl > $O/stage_r$r.log 2>&1
  echo "stage r$r rc=$? t=$(( $(date +%s) - start ))"
done
python3 bench/stage_profile.py --merge $O/stage_r1.jsonl $O/stage_r2.jsonl $O/stage_r3.jsonl --out $O/quant_final.jsonl > $O/merge.log 2>&1; echo "merge rc=$?"
tar czf $OUT/s.tgz -C /tmp s
