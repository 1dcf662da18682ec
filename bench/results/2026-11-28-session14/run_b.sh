#!/usr/bin/env bash
# Device call (session 14): outputs split vs auto (one-pass) identical; stage A/B split vs auto.
cd "$(dirname "$0")/.."
O=${OUT:-/tmp/out}; mkdir -p $O/b
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv > $O/b/gpu.txt 2>&1
export PYTHONPATH=python SAGE2_LIBRARY=$PWD/.dev/libsage2.so
start=$(date +%s)
for path in split auto; do
  SAGE2_QUANT_PATH=$path timeout 150 python3 .scratch/ab_check.py $O/b/check_$path.json > $O/b/check_$path.log 2>&1
  echo "check $path rc=$? t=$(( $(date +%s) - start ))"
done
python3 - $O/b <<'PY'
import json, sys
a = json.load(open(sys.argv[1] + "/check_split.json")); b = json.load(open(sys.argv[1] + "/check_auto.json"))
for k in a: print(k, "identical" if a[k]["sha"] == b.get(k, {}).get("sha") else "DIFFERENT", a[k]["cos_head0"], b.get(k, {}).get("cos_head0"))
PY
for r in 1 2; do for path in split auto; do
  SAGE2_QUANT_PATH=$path timeout 100 python3 bench/stage_profile.py --shapes quant --rounds 1 --calls 3 --out $O/b/stage_${path}_r$r.jsonl > $O/b/stage_${path}_r$r.log 2>&1
  echo "$path r$r rc=$? t=$(( $(date +%s) - start ))"
  [ $(( $(date +%s) - start )) -gt 330 ] && break 2
done; done
grep -h "^median" $O/b/stage_*_r1.log | head -40
cd $O && tar czf b.tgz b && ls -la
