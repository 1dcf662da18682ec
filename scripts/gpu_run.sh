#!/usr/bin/env bash
# One device call's worth of checks and measurements on the GPU machine, each step bounded in time
# and logged under OUT (files come back from there):
#   bash scripts/gpu_run.sh OUT [--bundle .dev] [--suite FILTER|none] [--shards N] [--pytest] [--quantize]
#                           [--stage-ab BASE_BUNDLE] [--quant-records]
#                           [--scoreboard "scoreboard_bench.py options"|none]
# --suite: doctest -tc filter for sage2_gpu_tests ("" = the whole suite); --shards N: its test cases
# in N processes at once on the one GPU (doctest --first/--last ranges in file order; the suite is
# bound by NVRTC compiles on the host's cores, and each process has its own Contexts; logs
# gpu_suite_shardK.log; the whole suite no longer fits one 10-minute call in one process), --pytest: the Python
# suite, --quantize: sage2-bench-quantize (every quantize path, hd 128, N 1K..32K), --stage-ab: the
# quantize stage of BASE_BUNDLE against the bundle, 3 rounds alternated, first (bench/stage_ab.sh
# into OUT/ab, bench/stage_compare.py → OUT/ab/compare.txt), --quant-records: the `quant` records
# (3 rounds of bench/stage_profile.py merged into OUT/quant_final.jsonl), --scoreboard:
# bench/scoreboard_run.sh with those options. A summary of exit codes is printed last.
set -uo pipefail
out=${1:?usage: gpu_run.sh OUT [options]}
shift
bundle=.dev suite=none shards=1 pytest=0 quant=0 sb=none stage_base='' quant_records=0
while (($#)); do
  case $1 in
    --bundle) bundle=$2; shift 2 ;;
    --suite) suite=$2; shift 2 ;;
    --shards) shards=$2; shift 2 ;;
    --pytest) pytest=1; shift ;;
    --quantize) quant=1; shift ;;
    --scoreboard) sb=$2; shift 2 ;;
    --stage-ab) stage_base=$2; shift 2 ;;
    --quant-records) quant_records=1; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
summary=()
step() {  # step NAME TIMEOUT_S COMMAND...
  local name=$1 t=$2
  shift 2
  local t0=$SECONDS
  timeout "$t" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  summary+=("$name rc=$rc $((SECONDS - t0))s")
  tail -4 "$out/$name.log"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv >"$out/gpu.txt" 2>&1
if [[ -n $stage_base ]]; then  # (timed before anything else loads the GPU)
  step stage_ab 200 bash bench/stage_ab.sh "$out/ab" 3 base="$stage_base" new="$bundle"
  python3 bench/stage_compare.py "$out/ab/stage_base_r*.jsonl" "$out/ab/stage_new_r*.jsonl" >"$out/ab/compare.txt" 2>&1
  cat "$out/ab/compare.txt"
fi
if [[ $quant_records == 1 ]]; then
  for r in 1 2 3; do
    step "stage_r$r" 100 env PYTHONPATH="$PWD/python" SAGE2_LIBRARY="$(cd "$bundle" && pwd)/libsage2.so" SAGE2_TIERED_COMPILE=0 \
      python3 bench/stage_profile.py --shapes quant --rounds 1 --calls 3 --out "$out/stage_r$r.jsonl"
  done
  step quant_merge 30 python3 bench/stage_profile.py --merge "$out/stage_r1.jsonl" "$out/stage_r2.jsonl" \
    "$out/stage_r3.jsonl" --out "$out/quant_final.jsonl"
fi
if [[ $quant == 1 ]]; then
  step quantize 240 "$bundle/bench/sage2-bench-quantize" --seq-lens 1024,2048,4096,8192,32768 --reps 20 \
    --json "$out/quantize.jsonl" --command "sage2-bench-quantize --seq-lens 1024,2048,4096,8192,32768 --reps 20"
fi
if [[ $suite != none ]]; then
  filter=()
  [[ -n $suite ]] && filter=(-tc="$suite")
  n=0
  ((shards > 1)) && n=$("$bundle/tests/sage2_gpu_tests" "${filter[@]}" --count 2>/dev/null | grep -o 'filters: [0-9]*' | grep -o '[0-9]*$')
  if ((shards > 1 && ${n:-0} > 0)); then  # (no case to run here, e.g. no GPU: one process says why)
    per=$(((${n:-0} + shards - 1) / shards))
    t0=$SECONDS pids=()
    for ((k = 0; k < shards; k++)); do
      timeout 540 "$bundle/tests/sage2_gpu_tests" "${filter[@]}" --first=$((k * per + 1)) --last=$(((k + 1) * per)) \
        >"$out/gpu_suite_shard$k.log" 2>&1 &
      pids+=($!)
    done
    for ((k = 0; k < shards; k++)); do
      wait "${pids[k]}"
      rc=$?
      summary+=("gpu_suite shard $k of $shards (cases $((k * per + 1))-$(((k + 1) * per)) of ${n:-?}) rc=$rc $((SECONDS - t0))s")
      tail -3 "$out/gpu_suite_shard$k.log"
      # a failing shard's cases and assertions on stdout too: its log may not travel back
      ((rc != 0)) && grep -B4 -A12 "ERROR:" "$out/gpu_suite_shard$k.log" | head -80
    done
  else
    step gpu_suite 480 "$bundle/tests/sage2_gpu_tests" "${filter[@]}"
  fi
fi
if [[ $pytest == 1 ]]; then
  step pytest 300 env PYTHONPATH=python SAGE2_LIBRARY="$bundle/libsage2.so" python3 -m pytest -q python/tests
fi
if [[ $sb != none ]]; then
  # shellcheck disable=SC2086
  step scoreboard 420 bash bench/scoreboard_run.sh --build "$bundle" --out "$out/sb" $sb
  cp "$out/sb/scoreboard.txt" "$out/scoreboard.txt" 2>/dev/null
fi
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
