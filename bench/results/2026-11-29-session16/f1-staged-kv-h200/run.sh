#!/usr/bin/env bash
# session 16, g: the statistics ring and the constants from the combine (HEAD) against 4ac29de (.dev-base): outputs hashed, stage
# profile 3 rounds alternated, ncu at Flux; everything tarred into $OUT/e.tgz.
cd "$(dirname "$0")/.."
O=/tmp/g; rm -rf $O; mkdir -p $O
export PYTHONPATH=python
start=$(date +%s)
t() { echo "$1 rc=$2 t=$(( $(date +%s) - start ))"; }
for v in base new; do
  lib=.dev; [ $v = base ] && lib=.dev-base
  SAGE2_LIBRARY=$PWD/$lib/libsage2.so timeout 150 python3 .scratch/ab_check.py $O/check_$v.json > $O/check_$v.log 2>&1
  t "check $v" $?
done
python3 - $O <<'PY'
import json, sys
d = sys.argv[1]; a = json.load(open(d + "/check_base.json")); b = json.load(open(d + "/check_new.json"))
for k in a: print(k, "identical" if a[k]["sha"] == b.get(k, {}).get("sha") else "DIFFERENT")
PY
for r in 1 2 3; do
  for v in base new; do
    lib=.dev; [ $v = base ] && lib=.dev-base
    SAGE2_LIBRARY=$PWD/$lib/libsage2.so timeout 100 python3 bench/stage_profile.py --shapes quant --rounds 1 --calls 3 --out $O/stage_${v}_r$r.jsonl > $O/stage_${v}_r$r.log 2>&1
    t "stage $v r$r" $?
  done
done
for v in base new; do
  lib=.dev; [ $v = base ] && lib=.dev-base
  SAGE2_LIBRARY=$PWD/$lib/libsage2.so timeout 100 ncu --target-processes all -k regex:"sage2_(channel_stats|quantize_k|quantize_v)" --launch-skip 3 --launch-count 3 \
    --metrics gpu__time_duration.sum,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,launch__registers_per_thread \
    python3 bench/ncu_quantize.py flux-1024 > $O/ncu_flux_$v.txt 2>&1
  t "ncu $v" $?
  SAGE2_LIBRARY=$PWD/$lib/libsage2.so timeout 100 ncu --target-processes all -k regex:"sage2_(channel_stats|quantize_k|quantize_v)" --launch-skip 3 --launch-count 3 \
    --metrics gpu__time_duration.sum,smsp__inst_executed.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size \
    python3 bench/ncu_quantize.py b4h32-hd128-8k > $O/ncu_8k_$v.txt 2>&1
  t "ncu8k $v" $?
done
tar czf $OUT/g.tgz -C /tmp g
grep -E "sage2_|duration|inst_executed" $O/ncu_flux_*.txt | grep -v PROF
paste <(grep -h "^median" $O/stage_base_r3.log) <(grep -h "^median" $O/stage_new_r3.log | awk '{print $7}')
