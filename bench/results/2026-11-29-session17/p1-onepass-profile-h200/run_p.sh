#!/usr/bin/env bash
# session 17 p: the one-pass K/V kernel (op 7) at HEAD profiled: stage_profile onepass vs auto (1 round each), ncu
# sections + per-SASS source page of sage2_quantize_kv at Flux and B4H32 hd128 8K.
cd "$(dirname "$0")/.."
O=/tmp/p; rm -rf $O; mkdir -p $O
export PYTHONPATH=python SAGE2_LIBRARY=$PWD/.dev/libsage2.so
start=$(date +%s)
t() { echo "$1 rc=$2 t=$(( $(date +%s) - start ))"; }
for v in auto onepass; do
  SAGE2_QUANT_PATH=$v timeout 100 python3 bench/stage_profile.py --shapes quant --rounds 1 --calls 3 --out $O/stage_$v.jsonl > $O/stage_$v.log 2>&1
  t "stage $v" $?
done
for shape in flux-1024 b4h32-hd128-8k; do
  SAGE2_QUANT_PATH=onepass timeout 150 ncu --target-processes all -k regex:"sage2_quantize_kv" --launch-skip 2 --launch-count 1 \
    --set full --import-source no -o $O/kv_$shape python3 bench/ncu_quantize.py $shape > $O/ncu_$shape.log 2>&1
  t "ncu $shape" $?
  ncu -i $O/kv_$shape.ncu-rep --page details > $O/kv_$shape.details.txt 2>&1
  ncu -i $O/kv_$shape.ncu-rep --page source --csv --print-source sass > $O/kv_$shape.sass.csv 2>&1
  t "export $shape" $?
done
rm -f $O/*.ncu-rep
tar czf $OUT/p.tgz -C /tmp p
paste <(grep -h "^median" $O/stage_auto.log) <(grep -h "^median" $O/stage_onepass.log | awk '{print $8}')
