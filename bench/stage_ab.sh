#!/usr/bin/env bash
# The quantize stage of several builds, rounds alternated in one device call (the A/B each
# quantize change is measured with; bench/NOTES.md):
#   bash bench/stage_ab.sh OUT ROUNDS NAME=BUNDLE[:ENV=VALUE] ...
# e.g. bash bench/stage_ab.sh /tmp/ab 3 new=.dev base=.dev-base
# Round r runs `bench/stage_profile.py --shapes quant` (STAGE_SHAPES: another list) once per build, in the order given, with
# SAGE2_LIBRARY=BUNDLE/libsage2.so (and ENV=VALUE when given), into OUT/stage_NAME_rR.jsonl (log
# beside it); OUT/steps.txt gets each run's exit code and OUT/version.txt each bundle's commit.
# Compare two builds with python3 bench/stage_compare.py 'OUT/stage_A_r*.jsonl' 'OUT/stage_B_r*.jsonl'.
set -u
(($# > 2)) || { echo "usage: bash bench/stage_ab.sh OUT ROUNDS NAME=BUNDLE[:ENV=VALUE] ..." >&2; exit 2; }
out=$1 rounds=$2
shift 2
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
export PYTHONPATH="$repo/python${PYTHONPATH:+:$PYTHONPATH}" SAGE2_TIERED_COMPILE=${SAGE2_TIERED_COMPILE:-0}
for build in "$@"; do
  b=${build#*=}
  "${b%%:*}/tools/sage2-info" --version >>"$out/version.txt" 2>&1
done
for ((r = 1; r <= rounds; r++)); do
  for build in "$@"; do
    name=${build%%=*} rest=${build#*=}
    bundle=${rest%%:*} env=()
    [[ $rest == *:* ]] && env=("${rest#*:}")
    env "${env[@]}" SAGE2_LIBRARY="$(cd "$bundle" && pwd)/libsage2.so" timeout 100 \
      python3 "$repo/bench/stage_profile.py" --shapes "${STAGE_SHAPES:-quant}" --rounds 1 --calls 3 --out "$out/stage_${name}_r$r.jsonl" \
      >"$out/stage_${name}_r$r.log" 2>&1
    rc=$?
    echo "[$(date +%T)] stage $name r$r rc=$rc" | tee -a "$out/steps.txt"
  done
done
