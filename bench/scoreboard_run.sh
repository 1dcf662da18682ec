#!/usr/bin/env bash
# One benchmark run for every scoreboard cell (../shared/tools/scoreboard.py), on the GPU machine:
#   bash bench/scoreboard_run.sh --out DIR [--build DIR] [--dry-run] [bench/scoreboard_bench.py options]
# Needs <build>/libsage2.so and <build>/bench/sage2-bench-attention (default build/), torch, and the
# reference package in .anchors-ref/ (a copy of ../shared/anchors/sageattention-ref). Writes
# DIR/<group>.jsonl (records of one run id; group = host, decode, hd64_full, ..., heads, small,
# sage2_cpp_host), DIR/log.txt, DIR/summary.txt, and DIR/scoreboard.txt when scoreboard.py is found
# ($SCOREBOARD, ../shared/tools/, shared/tools/). What is measured and how (rounds alternating the
# methods, CUDA events for e2e, torch.profiler/CUPTI for kernel and stages, the commit the loaded
# libsage2 reports): bench/scoreboard_bench.py. Options there: --methods, --modes, --head-dims,
# --seq-lens, --causal, --extra-head-dims, --rounds, --reps, --reps-long, --prof-calls, --flush-l2,
# --budget-s, --run, ...
# Exit status: 0 every step ran cleanly, 1 some step failed or was skipped (the rest is recorded).
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cmdline="bash bench/scoreboard_run.sh $*"
out="" build="$repo/build" dry=0 pass=()
while (($#)); do
  case $1 in
    --out) out=${2:?--out needs a folder}; shift 2 ;;
    --build) build=${2:?--build needs a folder}; shift 2 ;;
    --dry-run) dry=1; pass+=("$1"); shift ;;
    -h|--help) sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) pass+=("$1"); shift ;;
  esac
done
[[ -n $out ]] || { echo "usage: bash bench/scoreboard_run.sh --out DIR [options]  (--help)" >&2; exit 2; }
out=$(realpath -m "$out")  # the driver runs from the repository root
build=$(realpath -m "$build")
if ((dry)); then
  # Fake records never go near bench/results.
  case $out in /tmp/*) ;; *) echo "--dry-run writes only under /tmp" >&2; exit 2 ;; esac
fi
mkdir -p "$out" || exit 2

export PYTHONPATH="$repo/python:$repo/.anchors-ref${PYTHONPATH:+:$PYTHONPATH}"
export SAGE2_LIBRARY="${SAGE2_LIBRARY:-$build/libsage2.so}"
if ((!dry)); then
  # Missing pieces are reported, not fatal: the driver logs the failing steps and measures the rest.
  [[ -f $SAGE2_LIBRARY ]] || echo "warning: no $SAGE2_LIBRARY (sage2 Python steps will fail)"
  [[ -x $build/bench/sage2-bench-attention ]] || echo "warning: no $build/bench/sage2-bench-attention (no sage2_cpp host_us)"
  [[ -d $repo/.anchors-ref/sageattention ]] || echo "warning: no $repo/.anchors-ref (sage2_ref steps will fail)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv 2>&1 | tee -a "$out/log.txt"
fi

cd "$repo" || exit 2
python3 -u bench/scoreboard_bench.py --out "$out" --bench-bin "$build/bench/sage2-bench-attention" \
  --command "$cmdline" "${pass[@]}" 2>&1 | tee -a "$out/log.txt"
rc=${PIPESTATUS[0]}

for sb in "${SCOREBOARD:-}" "$repo/../shared/tools/scoreboard.py" "$repo/shared/tools/scoreboard.py"; do
  if [[ -n $sb && -f $sb ]]; then
    python3 "$sb" --results "$out" | tee "$out/scoreboard.txt"
    break
  fi
done
exit "$rc"
