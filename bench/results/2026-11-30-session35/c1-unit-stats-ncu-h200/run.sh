#!/usr/bin/env bash
# ncu_source.py reads the source-counter CSVs: "stalls FILE KERNEL N" (samples by reason, N top instructions), "runs FILE" (executed / never-executed SASS runs with their no_inst samples)
# Session 35 c1 (discovery, branch s34-unit-stats e40d731 + an env switch): why the in-kernel
# statistics cost quantize_k / quantize_v 20-30 % per CTA. ncu --set full of one call's quantize_v
# and quantize_k under main (.dev-base), the branch with its statistics (br) and the branch with
# channel_stats launched (e3: SAGE2_EXP_NO_UNIT_STATS=1), at B4 H32 hd64 32K and Qwen prefill 4K.
set -u
o=$OUT/c1; mkdir -p $o
export PYTHONPATH=$PWD/python
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $o/gpu.txt
for s in b4h32-hd64-32k qwen2.5-7b-prefill-4k; do
  for v in base br e3; do
    case $v in
      base) lib=$PWD/.dev-base/libsage2.so; ex="";;
      br) lib=$PWD/.scratch/dev-br/libsage2.so; ex="";;
      e3) lib=$PWD/.scratch/dev-br/libsage2.so; ex="SAGE2_EXP_NO_UNIT_STATS=1";;
    esac
    t0=$(date +%s)
    env SAGE2_LIBRARY=$lib $ex timeout 150 ncu --set full --import-source no \
      -k regex:"sage2_quantize_(k|v)" --launch-skip 2 --launch-count 2 -o $o/ncu_${s}_$v -f \
      python3 bench/ncu_quantize.py $s > $o/ncu_${s}_$v.log 2>&1
    ncu -i $o/ncu_${s}_$v.ncu-rep --page details --csv > $o/ncu_${s}_$v.details.csv 2>/dev/null
    ncu -i $o/ncu_${s}_$v.ncu-rep --page source --print-source sass --csv > $o/ncu_${s}_$v.sass.csv 2>/dev/null
    echo "== $s $v ($(( $(date +%s) - t0 )) s)"
    ncu -i $o/ncu_${s}_$v.ncu-rep --print-summary per-kernel 2>/dev/null | grep -E "sage2_|Duration|DRAM Throughput|Registers|Achieved Occ|Waves|Grid Size|Executed Ipc A" | head -24
  done
done
rm -f $o/*.ncu-rep
cd $OUT && tar cJf c1.tar.xz c1 && rm -rf c1
