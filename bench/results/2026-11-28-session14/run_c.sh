#!/usr/bin/env bash
cd "$(dirname "$0")/.."
O=${OUT:-/tmp/out}; mkdir -p $O/c
export PYTHONPATH=python SAGE2_LIBRARY=$PWD/.dev/libsage2.so
start=$(date +%s)
for path in split auto; do
  SAGE2_QUANT_PATH=$path timeout 150 python3 .scratch/ab_check.py $O/c/check_$path.json > $O/c/check_$path.log 2>&1
  echo "check $path rc=$? t=$(( $(date +%s) - start ))"
done
python3 - $O/c <<'PY'
import json, sys
a = json.load(open(sys.argv[1] + "/check_split.json")); b = json.load(open(sys.argv[1] + "/check_auto.json"))
for k in a: print(k, "identical" if a[k]["sha"] == b.get(k, {}).get("sha") else "DIFFERENT", a[k]["cos_head0"], b.get(k, {}).get("cos_head0"))
PY
for r in 1 2; do
  SAGE2_QUANT_PATH=auto timeout 100 python3 bench/stage_profile.py --shapes quant --rounds 1 --calls 3 --out $O/c/stage_auto_r$r.jsonl > $O/c/stage_auto_r$r.log 2>&1
  echo "auto r$r rc=$? t=$(( $(date +%s) - start ))"
done
grep -h "^median" $O/c/stage_auto_r1.log
grep -h -A3 "round 1 flux\|round 1 b4h32-hd128-8k" $O/c/stage_auto_r1.log
cd $O && tar czf c.tgz c
