#!/usr/bin/env bash
# A/B of pipelined calls (SAGE2_PIPELINE_CHUNKS) on the GPU machine, one process per setting, the
# settings alternated over ROUNDS rounds (same seeded inputs: sage2-bench-attention's):
#   bash bench/pipeline_ab.sh BUILD OUT [ROUNDS] [SETTINGS]
# SETTINGS: space-separated "chunks[:same]" (":same": SAGE2_PIPELINE_PRIORITY=same), default
# "1 2 4 8 4:same". Writes OUT/ab_<setting>_r<round>.jsonl (records of sage2-bench-attention with
# the setting in "env") and OUT/small_<setting>_r<round>.jsonl for the scoreboard's small shapes.
set -uo pipefail
build=${1:?build folder}; out=${2:?output folder}; rounds=${3:-3}; settings=${4:-"1 2 4 8 4:same"}
bin="$build/bench/sage2-bench-attention"
mkdir -p "$out"
export SAGE2_CACHE_DIR=${SAGE2_CACHE_DIR:-/tmp/sage2-ab-cache}
for r in $(seq 1 "$rounds"); do
  for s in $settings; do
    chunks=${s%%:*}; prio=high; [[ $s == *:same ]] && prio=same
    tag=${s/:/-}
    export SAGE2_PIPELINE_CHUNKS=$chunks SAGE2_PIPELINE_PRIORITY=$prio
    "$bin" --head-dims 64,128 --seq-lens 1024,2048,4096,8192 --causal 0,1 --reps 20 --modes e2e,kernel \
      --run "ab-$tag-r$r" --json "$out/ab_${tag}_r$r.jsonl" --command "SAGE2_PIPELINE_CHUNKS=$chunks SAGE2_PIPELINE_PRIORITY=$prio $bin ..." \
      > "$out/ab_${tag}_r$r.txt" 2>&1 || echo "setting $s round $r failed (rc $?)"
    {
      "$bin" --batch 1 --heads 28 --head-dims 128 --seq-lens 3000 --causal 1 --reps 20 --modes e2e,kernel
      "$bin" --batch 2 --heads 40 --head-dims 64 --seq-lens 6000 --causal 0 --reps 20 --modes e2e,kernel
      "$bin" --batch 64 --heads 12 --head-dims 64 --seq-lens 197 --causal 0 --reps 20 --modes e2e,kernel
    } > "$out/small_${tag}_r$r.txt" 2>&1 || echo "small setting $s round $r failed"
  done
done
unset SAGE2_PIPELINE_CHUNKS SAGE2_PIPELINE_PRIORITY
# Summary: median over rounds of e2e / kernel ms per cell and setting.
python3 - "$out" <<'PY'
import glob, re, statistics, sys, collections
out = sys.argv[1]
cells = collections.defaultdict(list)
for f in sorted(glob.glob(out + "/ab_*_r*.txt")) + sorted(glob.glob(out + "/small_*_r*.txt")):
    tag = re.match(r".*/(ab|small)_(.*)_r\d+\.txt", f).group(2)
    for line in open(f):
        m = re.match(r"sage2\s+(e2e|kernel)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)", line)
        if m:
            mode, d, c, n, ms, tops = m.groups()
            cells[(int(d), int(c), int(n), mode, tag)].append(float(ms))
tags = sorted({k[4] for k in cells})
keys = sorted({k[:3] for k in cells})
print("d causal N | " + " | ".join(f"e2e {t}" for t in tags) + " | kernel (ms, setting 1) | e2e/kernel per setting")
for d, c, n in keys:
    e = {t: statistics.median(cells[(d, c, n, "e2e", t)]) for t in tags if cells.get((d, c, n, "e2e", t))}
    k = statistics.median(cells[(d, c, n, "kernel", tags[0])]) if cells.get((d, c, n, "kernel", tags[0])) else float("nan")
    print(f"{d} {c} {n} | " + " | ".join(f"{e.get(t, float('nan')):.3f}" for t in tags) + f" | {k:.3f} | " +
          " ".join(f"{t}:{e[t]/k:.2f}" for t in tags if t in e))
PY
