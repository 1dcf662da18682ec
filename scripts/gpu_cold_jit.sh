#!/usr/bin/env bash
# On the GPU machine: the cold first call at several head dims (issue 34 / 40), each in a fresh
# process on an empty kernel cache, ROUNDS times, then once more on the last round's cache (disk hit).
#   bash scripts/gpu_cold_jit.sh OUT [BUILD=.dev] [HEAD_DIMS="72 136 200 320"] [ROUNDS=3]
# The environment passes through (the tiered compile is on by default; SAGE2_TIERED_COMPILE=0
# measures the wait for the optimized kernels); SHAPE="B H N"
# sets the call's shape (default "1 4 1000", the scoreboard's jit shape). Every process also gets a
# fresh CUDA_CACHE_PATH: NVRTC 13 / the driver keep compiled programs in ~/.nv/ComputeCache, so
# without it a head dim compiled once before on the machine compiles ~7x faster (session 18, c4).
# Writes OUT/cold_jit.jsonl: one sage2-bench-jit --first-call line per process (its kernels, each
# with its source, tier and load time) plus "cache" ("empty" | "warm"), "round" and "commit"; and
# OUT/first_call.jsonl: the benchmark records (DESIGN.md "Benchmark records", mode first_call_s):
# per head dim the median over the rounds of the first call's seconds, and of the time until the
# optimized kernels serve the call ("optimized_after_s", the tiered compile).
set -euo pipefail
OUT=${1:?usage: gpu_cold_jit.sh OUT [BUILD] [HEAD_DIMS] [ROUNDS]}
BUILD=${2:-.dev}
DIMS=${3:-72 136 200 320}
ROUNDS=${4:-3}
read -r SB SH SN <<< "${SHAPE:-1 4 1000}"
mkdir -p "$OUT"
commit=$("$BUILD/tools/sage2-info" --version 2>/dev/null | awk '/commit/{print $NF}' | head -1)
for d in $DIMS; do
  for r in $(seq 1 "$ROUNDS"); do
    dir=$(mktemp -d /tmp/sage2-cold-XXXXXX)
    export CUDA_CACHE_PATH="$dir/driver-cache"
    line=$("$BUILD/bench/sage2-bench-jit" --cache-dir "$dir" --first-call "$d" --shape "$SB" "$SH" "$SN")
    echo "${line%\}}, \"cache\": \"empty\", \"round\": $r, \"commit\": \"$commit\"}" | tee -a "$OUT/cold_jit.jsonl"
    if [ "$r" = "$ROUNDS" ]; then
      line=$("$BUILD/bench/sage2-bench-jit" --cache-dir "$dir" --first-call "$d" --shape "$SB" "$SH" "$SN")
      echo "${line%\}}, \"cache\": \"warm\", \"round\": $r, \"commit\": \"$commit\"}" | tee -a "$OUT/cold_jit.jsonl"
    fi
    rm -rf "$dir"
  done
done
python3 - "$OUT" "$commit" "$*" <<'PY'
import json, os, statistics, sys, time
out, commit, args = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [json.loads(l) for l in open(os.path.join(out, "cold_jit.jsonl")) if l.strip()]
env = {k: v for k, v in os.environ.items() if k.startswith("SAGE2_")}
env["CUDA_CACHE_PATH"] = "fresh per process"
run = "cold-jit-" + time.strftime("%Y%m%dT%H%M%S") + "-" + commit[:12]
with open(os.path.join(out, "first_call.jsonl"), "w") as f:
    for hd in sorted({r["head_dim"] for r in rows}):
        cold = [r for r in rows if r["head_dim"] == hd and r["cache"] == "empty"]
        opt = [r["optimized_after_ms"] for r in cold]
        rec = dict(run=run, commit=commit, env=env, rounds=len(cold), method="sage2", mode="first_call_s",
                   head_dim=hd, s=statistics.median(r["first_call_ms"] for r in cold) / 1e3,
                   s_rounds=[r["first_call_ms"] / 1e3 for r in cold],
                   first_call_tier=cold[0]["first_call_tier"],
                   optimized_after_s=(statistics.median(opt) / 1e3 if min(opt) >= 0 else None),
                   optimized_after_s_rounds=[o / 1e3 for o in opt],
                   batch=cold[0]["batch"], heads=cold[0]["heads"], seq_len=cold[0]["seq_len"], causal=False, dtype="fp16", device=cold[0]["device"],
                   command="bash scripts/gpu_cold_jit.sh " + args)
        f.write(json.dumps(rec) + "\n")
        print(json.dumps(rec))
PY
