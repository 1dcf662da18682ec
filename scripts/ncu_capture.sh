#!/usr/bin/env bash
# One `ncu --set full` capture of a sage2 call's kernels on the GPU machine, with its details and
# SASS source pages as CSV beside it and a summary on stdout (the report itself is removed):
#   bash scripts/ncu_capture.sh OUTPREFIX LIBRARY KERNEL_REGEX SHAPE [LAUNCH_SKIP [LAUNCH_COUNT]]
# SHAPE: a name of bench/stage_profile.py SHAPES (run by bench/ncu_quantize.py); environment
# variables of the caller (SAGE2_*) reach the call.
set -u
out=$1 lib=$2 kern=$3 shape=$4 skip=${5:-2} count=${6:-1}
t0=$(date +%s)
env PYTHONPATH="$PWD/python" SAGE2_LIBRARY="$lib" timeout 150 ncu --set full --import-source no \
  -k regex:"$kern" --launch-skip "$skip" --launch-count "$count" -o "$out" -f \
  python3 bench/ncu_quantize.py "$shape" > "$out.log" 2>&1
ncu -i "$out.ncu-rep" --page details --csv > "$out.details.csv" 2>/dev/null
ncu -i "$out.ncu-rep" --page source --print-source sass --csv > "$out.sass.csv" 2>/dev/null
echo "== $(basename "$out") ($(( $(date +%s) - t0 )) s)"
ncu -i "$out.ncu-rep" --print-summary per-kernel 2>/dev/null |
  grep -E "sage2_|Duration|DRAM Throughput|Registers|Achieved Occ|Theoretical Occ|Waves|Grid Size|Block Size|Executed Ipc A|Dynamic Shared" | head -24
rm -f "$out.ncu-rep"
