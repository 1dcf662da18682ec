#!/usr/bin/env bash
# The fleet path end to end on the GPU machine (issue 43): a warm-up, its cache exported as a
# bundle, the bundle imported into an empty cache (the "second machine"), then a fresh process
# makes random calls inside the warm-up's selection (bench/warm_calls.py) and records how many
# kernels they compiled (the library's own counter) and the slowest first call (`warm_calls`).
#   bash scripts/gpu_fleet.sh OUT [--bundle .dev] [--offline BUNDLE_FILE] [--calls 240]
# Two warm-ups: `sage2-autotune --device 0` here (default selection: tuning, then the warm-up),
# and, with --offline, a bundle made by `sage2-autotune --arch sm_90a --compile-only` on a machine
# without a GPU (its SHA-256 in BUNDLE_FILE.sha256 when present is checked at import).
# OUT gets autotune.json, the logs and warm_calls.jsonl.
set -uo pipefail
out=${1:?usage: gpu_fleet.sh OUT [--bundle .dev] [--offline BUNDLE_FILE] [--calls N]}
shift
bundle=.dev offline="" calls=240
while (($#)); do
  case $1 in
    --bundle) bundle=$2; shift 2 ;;
    --offline) offline=$2; shift 2 ;;
    --calls) calls=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" SAGE2_LIBRARY="$PWD/$bundle/libsage2.so"
tools="$bundle/tools"
work=$(mktemp -d /tmp/sage2-fleet.XXXXXX)
run="$(date -u +%Y-%m-%dT%H:%MZ)-fleet"
rc=0
note() { echo "== $*" | tee -a "$out/fleet.log"; }

# Imports BUNDLE into three empty caches (one per round) and makes the random calls there, a fresh
# process per round (NAME: the record's bundle).
check_bundle() {
  local name=$1 file=$2 sha=${3:-} dirs=()
  for r in 1 2 3; do
    local dir="$work/imported-$name-$r"
    local args=(--dir "$dir" import "$file")
    [[ -n $sha ]] && args+=(--sha256 "$sha")
    note "import $name (round $r): sage2-cache ${args[*]}"
    "$tools/sage2-cache" "${args[@]}" >>"$out/fleet.log" 2>&1 || { note "import $name failed"; rc=1; return; }
    dirs+=("$dir")
  done
  note "random calls against $name"
  python3 bench/warm_calls.py --cache-dirs "$(IFS=,; echo "${dirs[*]}")" --bundle "$name" --calls "$calls" \
    --run "$run" --out "$out/warm_calls.jsonl" >>"$out/fleet.log" 2>&1 || { note "$name: calls compiled (or failed)"; rc=1; }
  tail -1 "$out/warm_calls.jsonl"
}

note "tune + warm-up: sage2-autotune --device 0"
t0=$SECONDS
"$tools/sage2-autotune" --device 0 --cache-dir "$work/tuned" --no-progress --report "$out/autotune.json" \
  >"$out/autotune.txt" 2>&1 || { note "sage2-autotune failed"; rc=1; }
note "sage2-autotune: $((SECONDS - t0)) s"
tail -6 "$out/autotune.txt"
note "tuned vs heuristic where the database changes a tile"
python3 bench/tuned_vs_heuristic.py --cache-dir "$work/tuned" --out "$out/tuned_vs_heuristic.jsonl" \
  >"$out/tuned_vs_heuristic.txt" 2>&1 || rc=1
cat "$out/tuned_vs_heuristic.txt"
"$tools/sage2-cache" --dir "$work/tuned" export "$work/tuned.bundle" >"$out/export.txt" 2>&1 || rc=1
sha=$(grep -oiE '\b[0-9a-f]{64}\b' "$out/export.txt" | head -1)
check_bundle autotune "$work/tuned.bundle" "$sha"

if [[ -n $offline ]]; then
  osha=""
  [[ -f $offline.sha256 ]] && osha=$(grep -oiE '\b[0-9a-f]{64}\b' "$offline.sha256" | head -1)
  check_bundle compile-only "$offline" "$osha"
fi
rm -rf "$work"
exit $rc
