#!/usr/bin/env bash
# session 17 q: the lagged one-pass K/V kernel (working tree) — quantize GPU test (onepass == split bytes), outputs hashed
# split vs onepass, stage_profile alternated (split / onepass), ncu of sage2_quantize_kv at Flux and 8K.
cd "$(dirname "$0")/.."
O=/tmp/q; rm -rf $O; mkdir -p $O
export PYTHONPATH=python SAGE2_LIBRARY=$PWD/.dev/libsage2.so
start=$(date +%s)
t() { echo "$1 rc=$2 t=$(( $(date +%s) - start ))"; }
timeout 300 .dev/tests/sage2_gpu_tests -tc='gpu quantize: every variant*' > $O/gpu_quant.log 2>&1
t "gpu quantize" $?; tail -3 $O/gpu_quant.log
for v in split onepass; do
  SAGE2_QUANT_PATH=$v timeout 150 python3 .scratch/ab_check.py $O/check_$v.json > $O/check_$v.log 2>&1
  t "check $v" $?
done
python3 - $O <<'PY'
import json, sys
d = sys.argv[1]; a = json.load(open(d + "/check_split.json")); b = json.load(open(d + "/check_onepass.json"))
for k in a: print(k, "identical" if a[k]["sha"] == b.get(k, {}).get("sha") else "DIFFERENT")
PY
for r in 1 2; do
  for v in split onepass; do
    SAGE2_QUANT_PATH=$v timeout 100 python3 bench/stage_profile.py --shapes quant --rounds 1 --calls 3 --out $O/stage_${v}_r$r.jsonl > $O/stage_${v}_r$r.log 2>&1
    t "stage $v r$r" $?
  done
done
for shape in flux-1024 b4h32-hd128-8k; do
  SAGE2_QUANT_PATH=onepass timeout 100 ncu --target-processes all -k regex:"sage2_quantize_kv" --launch-skip 2 --launch-count 1 \
    --metrics gpu__time_duration.sum,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,launch__registers_per_thread,lts__t_sector_hit_rate.pct,smsp__issue_active.avg.pct_of_peak_sustained_active \
    python3 bench/ncu_quantize.py $shape > $O/ncu_$shape.txt 2>&1
  t "ncu $shape" $?
  grep -E "duration|inst_executed|bytes_read|bytes_write|dram__throughput|warps_active|grid_size|registers|hit_rate|issue_active" $O/ncu_$shape.txt
done
tar czf $OUT/q.tgz -C /tmp q
for r in 1 2; do paste <(grep -h "^median" $O/stage_split_r$r.log | awk '{print $5, $8}') <(grep -h "^median" $O/stage_onepass_r$r.log | awk '{print $8}'); done
