#!/usr/bin/env bash
# session 19 a2: the sampled split stage (V before K, fix-up in quantize_k) — its GPU tests, then the quant stage A/B (old split = .dev-base, new Auto = .dev), 3 rounds alternated.
cd "$(dirname "$0")/.."
O=/tmp/a2; rm -rf $O; mkdir -p $O
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CUDA_CACHE_PATH=/tmp/a2-cc
start=$(date +%s)
timeout 300 .dev/tests/sage2_gpu_tests -tc='gpu quantize: every variant*,gpu nonfinite*' > $O/gpu_quant_nonfinite.log 2>&1
echo "tests1 rc=$? t=$(( $(date +%s) - start ))"; tail -3 $O/gpu_quant_nonfinite.log
timeout 200 .dev/tests/sage2_gpu_tests -tc='gpu attention: matrix*,gpu arch*' > $O/gpu_api_arch.log 2>&1
echo "tests2 rc=$? t=$(( $(date +%s) - start ))"; tail -3 $O/gpu_api_arch.log
export PYTHONPATH=python
for r in 1 2 3; do
  for v in base new; do
    lib=$PWD/.dev/libsage2.so; [ $v = base ] && lib=$PWD/.dev-base/libsage2.so
    SAGE2_LIBRARY=$lib timeout 100 python3 bench/stage_profile.py --shapes quant --rounds 1 --calls 3 --out $O/stage_${v}_r$r.jsonl > $O/stage_${v}_r$r.log 2>&1
    echo "stage $v r$r rc=$? t=$(( $(date +%s) - start ))"
  done
done
python3 bench/stage_profile.py --merge $O/stage_new_r1.jsonl $O/stage_new_r2.jsonl $O/stage_new_r3.jsonl --out $O/quant_new.jsonl > $O/merge_new.log 2>&1
python3 bench/stage_profile.py --merge $O/stage_base_r1.jsonl $O/stage_base_r2.jsonl $O/stage_base_r3.jsonl --out $O/quant_base.jsonl > $O/merge_base.log 2>&1
grep -h "median of\|round 1 flux\|round 1 b4h32-hd128-8k" -A4 $O/stage_new_r1.log | head -12
tar czf $OUT/a2.tgz -C /tmp a2
