#!/usr/bin/env bash
# session 17 t: the quantize bodies' trims (fc61845, .dev) against e11b64e (.dev-base): outputs hashed, nonfinite GPU tests,
# stage_profile auto 2 rounds alternated, ncu instruction counts of the split kernels.
cd "$(dirname "$0")/.."
O=/tmp/t; rm -rf $O; mkdir -p $O
export PYTHONPATH=python
start=$(date +%s)
t() { echo "$1 rc=$2 t=$(( $(date +%s) - start ))"; }
timeout 120 .dev/tests/sage2_gpu_tests -tc='gpu nonfinite: quantize stage*,gpu quantize: groups of tiny*' > $O/gpu_quick.log 2>&1
t "gpu quick" $?; tail -3 $O/gpu_quick.log
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
for r in 1 2; do
  for v in base new; do
    lib=.dev; [ $v = base ] && lib=.dev-base
    SAGE2_LIBRARY=$PWD/$lib/libsage2.so timeout 100 python3 bench/stage_profile.py --shapes quant --rounds 1 --calls 3 --out $O/stage_${v}_r$r.jsonl > $O/stage_${v}_r$r.log 2>&1
    t "stage $v r$r" $?
  done
done
for shape in b4h32-hd128-8k flux-1024; do
  SAGE2_LIBRARY=$PWD/.dev/libsage2.so timeout 100 ncu --target-processes all -k regex:"sage2_(channel_stats|quantize_k|quantize_v)" --launch-skip 3 --launch-count 3 \
    --metrics gpu__time_duration.sum,smsp__inst_executed.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active \
    python3 bench/ncu_quantize.py $shape > $O/ncu_$shape.txt 2>&1
  t "ncu $shape" $?
  grep -E "sage2_|duration|inst_executed|dram__|issue" $O/ncu_$shape.txt | grep -v "==PROF"
done
tar czf $OUT/t.tgz -C /tmp t
