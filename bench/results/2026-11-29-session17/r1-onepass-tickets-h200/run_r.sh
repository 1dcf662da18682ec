#!/usr/bin/env bash
# session 17 r: the ticket-ordered one-pass K/V kernel (e11b64e: .dev lag 16 MiB, .dev2 lag 6 MiB) — quantize GPU test,
# outputs hashed split vs onepass, stage_profile alternated (auto / onepass / onepass-lag6), ncu of sage2_quantize_kv.
cd "$(dirname "$0")/.."
O=/tmp/r; rm -rf $O; mkdir -p $O
export PYTHONPATH=python
start=$(date +%s)
t() { echo "$1 rc=$2 t=$(( $(date +%s) - start ))"; }
SAGE2_LIBRARY=$PWD/.dev/libsage2.so timeout 300 .dev/tests/sage2_gpu_tests -tc='gpu quantize: every variant*' > $O/gpu_quant.log 2>&1
t "gpu quantize" $?; tail -3 $O/gpu_quant.log; grep -m3 "ERROR" -A3 $O/gpu_quant.log
for v in split onepass; do
  SAGE2_LIBRARY=$PWD/.dev/libsage2.so SAGE2_QUANT_PATH=$v timeout 150 python3 .scratch/ab_check.py $O/check_$v.json > $O/check_$v.log 2>&1
  t "check $v" $?
done
python3 - $O <<'PY'
import json, sys
d = sys.argv[1]; a = json.load(open(d + "/check_split.json")); b = json.load(open(d + "/check_onepass.json"))
for k in a: print(k, "identical" if a[k]["sha"] == b.get(k, {}).get("sha") else "DIFFERENT")
PY
for r in 1 2; do
  for v in auto onepass onepass6; do
    lib=.dev; [ $v = onepass6 ] && lib=.dev2
    qp=$v; [ $v = onepass6 ] && qp=onepass
    SAGE2_LIBRARY=$PWD/$lib/libsage2.so SAGE2_QUANT_PATH=$qp timeout 100 python3 bench/stage_profile.py --shapes quant --rounds 1 --calls 3 --out $O/stage_${v}_r$r.jsonl > $O/stage_${v}_r$r.log 2>&1
    t "stage $v r$r" $?
  done
done
for lib in dev dev2; do
for shape in flux-1024 b4h32-hd128-8k; do
  SAGE2_LIBRARY=$PWD/.$lib/libsage2.so SAGE2_QUANT_PATH=onepass timeout 100 ncu --target-processes all -k regex:"sage2_quantize_kv" --launch-skip 2 --launch-count 1 \
    --metrics gpu__time_duration.sum,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,launch__registers_per_thread,lts__t_sector_hit_rate.pct,smsp__issue_active.avg.pct_of_peak_sustained_active \
    python3 bench/ncu_quantize.py $shape > $O/ncu_${lib}_$shape.txt 2>&1
  t "ncu $lib $shape" $?
  grep -E "duration|inst_executed|bytes_read|dram__throughput|hit_rate|issue_active" $O/ncu_${lib}_$shape.txt
done
done
tar czf $OUT/r.tgz -C /tmp r
