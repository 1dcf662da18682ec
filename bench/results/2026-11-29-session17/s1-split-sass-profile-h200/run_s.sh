#!/usr/bin/env bash
# session 17 s: where the split stage's instructions go — ncu source page (SASS, executed instructions and stall samples)
# of channel_stats, quantize_k, quantize_v at B4 H32 hd128 8K fp16 and Flux (auto path).
cd "$(dirname "$0")/.."
O=/tmp/s; rm -rf $O; mkdir -p $O
export PYTHONPATH=python SAGE2_LIBRARY=$PWD/.dev/libsage2.so
start=$(date +%s)
t() { echo "$1 rc=$2 t=$(( $(date +%s) - start ))"; }
for shape in b4h32-hd128-8k flux-1024; do
  timeout 200 ncu --target-processes all -k regex:"sage2_(channel_stats|quantize_k|quantize_v)" --launch-skip 3 --launch-count 3 \
    --set full --import-source no -o $O/split_$shape python3 bench/ncu_quantize.py $shape > $O/ncu_$shape.log 2>&1
  t "ncu $shape" $?
  ncu -i $O/split_$shape.ncu-rep --page details > $O/split_$shape.details.txt 2>&1
  for k in channel_stats quantize_k quantize_v; do
    ncu -i $O/split_$shape.ncu-rep -k sage2_$k --page source --csv --print-source sass > $O/$k.csv 2>&1
    python3 .scratch/sass_prof.py $O/$k.csv 30 > $O/${k}_${shape}_top.txt 2>&1
    python3 - $O/$k.csv > $O/${k}_${shape}_exec.txt <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1]))); hdr = rows[1]; ix = {h: i for i, h in enumerate(hdr)}
for r in rows[2:]:
    try: n = int(float(r[ix['Instructions Executed']].replace(',', '')))
    except: n = 0
    if n: print(r[ix['Address']][-5:], n, r[ix['Source']].strip()[:90])
PY
    rm -f $O/$k.csv
  done
  rm -f $O/split_$shape.ncu-rep
done
tar czf $OUT/s.tgz -C /tmp s
head -12 $O/*_b4h32-hd128-8k_top.txt
