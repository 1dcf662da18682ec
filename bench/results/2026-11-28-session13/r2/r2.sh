# session 13 r2: the quantize kernels' per-element work (new .dev) against 710dcf7 (.dev-base)
set -u
export PYTHONPATH=$PWD/python
R=/tmp/r2; mkdir -p $R
strings .dev/libsage2.so.0.1.0 | grep -m1 -E "^[0-9a-f]{40}" > $R/commit_new.txt
strings .dev-base/libsage2.so.0.1.0 | grep -m1 -E "^[0-9a-f]{40}" > $R/commit_base.txt
t0=$(date +%s)
SAGE2_CACHE_DIR=/tmp/c-new timeout 300 .dev/tests/sage2_gpu_tests -tc="gpu quantize*,gpu nonfinite: quantize stage*,gpu varlen*,gpu wgmma: Q quantized*" > $R/gpu_tests.log 2>&1
echo "tests rc=$? $(( $(date +%s)-t0 ))s"; tail -4 $R/gpu_tests.log
for round in 1 2; do
  for b in dev-base dev; do
    SAGE2_CACHE_DIR=/tmp/c-$b SAGE2_LIBRARY=$PWD/.$b/libsage2.so timeout 120 python3 bench/stage_profile.py --out $R/stages_$b.jsonl > $R/stages_${b}_$round.txt 2>&1
    echo "stages $b $round rc=$? $(( $(date +%s)-t0 ))s"
  done
done
SAGE2_CACHE_DIR=/tmp/c-dev SAGE2_LIBRARY=$PWD/.dev/libsage2.so timeout 100 ncu --target-processes all -k regex:"sage2_(channel_stats|quantize_k|quantize_v)" --launch-skip 3 --launch-count 3 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
    --metrics smsp__inst_executed.sum,dram__bytes_read.sum \
    python3 bench/ncu_quantize.py flux-1024 > $R/ncu_flux-1024.txt 2>&1
echo "ncu rc=$? $(( $(date +%s)-t0 ))s"
tar czf $OUT/r2.tgz -C /tmp r2
