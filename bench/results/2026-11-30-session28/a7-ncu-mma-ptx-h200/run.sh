#!/usr/bin/env bash
# ncu of sage2's mma attention kernel through PTX (sm_80 fp32-acc FP16 P~V; sm_89 Auto: acc16 FP8), B 4 H 32 N 8192, non-causal.
set -u
OUT=${OUT:-/tmp/out}/ncu; mkdir -p "$OUT"
export PYTHONPATH=$PWD/python SAGE2_LIBRARY=$PWD/.dev/libsage2.so SAGE2_CACHE_DIR=/tmp/ncu-cache
for arch in sm_80 sm_89; do for hd in 64 128; do
  SAGE2_TARGET_ARCH=$arch timeout 100 ncu --set full --clock-control none -k regex:sage2_attention_mma --launch-skip 1 -c 1 \
    -o "$OUT/${arch}_hd$hd" python3 bench/ncu_attention.py sage2 $hd 8192 0 > "$OUT/${arch}_hd$hd.log" 2>&1
  ncu -i "$OUT/${arch}_hd$hd.ncu-rep" --page details > "$OUT/${arch}_hd$hd.txt" 2>&1
  echo "$arch hd$hd rc=$?"; grep -E "Duration|Issue Slots Busy|Executed Ipc A|SM Busy|Compute \(SM\) Throughput|Registers Per|Achieved Occupancy|No Eligible" "$OUT/${arch}_hd$hd.txt" | head -12
done; done
