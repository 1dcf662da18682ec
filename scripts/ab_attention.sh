#!/usr/bin/env bash
# Before/after of the attention benchmark in one device call: two builds' sage2-bench-attention,
# run alternately ROUNDS times (the run-to-run spread of one build is then visible beside the
# difference between the builds), same shapes, one JSON file per (build, round) under OUT.
#   bash scripts/ab_attention.sh OUT BEFORE_DIR AFTER_DIR [ROUNDS=2] [sage2-bench-attention options]
# Default shapes: hd 64/128/256 × N 1K/8K/32K, non-causal, kernel and e2e modes, B 4, H 32.
# bench/ab_compare.py OUT prints the per-cell medians and the after/before ratios.
set -uo pipefail
out=${1:?usage: ab_attention.sh OUT BEFORE AFTER [ROUNDS] [options]}
before=${2:?} after=${3:?} rounds=${4:-2}
shift 4 2>/dev/null || shift $#
opts=("$@")
((${#opts[@]})) || opts=(--head-dims 64,128,256 --seq-lens 1024,8192,32768 --causal 0 --modes kernel,e2e --reps 20 --flush-l2 256)
mkdir -p "$out"
for ((r = 1; r <= rounds; ++r)); do
  for side in before after; do
    dir=$before
    [[ $side == after ]] && dir=$after
    echo "== round $r $side ($dir)"
    timeout 300 "$dir/bench/sage2-bench-attention" "${opts[@]}" --json "$out/${side}_$r.jsonl" \
      --command "$dir/bench/sage2-bench-attention ${opts[*]}" | tail -n +1
  done
done
