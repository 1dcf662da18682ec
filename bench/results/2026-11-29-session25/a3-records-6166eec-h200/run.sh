#!/usr/bin/env bash
# Session 25 call a3 (6166eec: branch s24-direct-wide + the early optimized build + Q sanitized
# without branches): the scoreboard records (e2e / kernel / real / small, with heads), the cold
# first calls at hd 72/136/200/320 (3 rounds), and the stage A/B against main (3 rounds; the
# attention kernel's time inside it, for the prologue change).
set -u
O=$OUT/a3; mkdir -p $O /tmp/s25a3
timeout 300 bash bench/scoreboard_run.sh --out /tmp/s25a3/sb --build .dev --modes e2e,kernel,real,small --budget-s 280 > /tmp/s25a3/sb_run.log 2>&1
echo "scoreboard rc=$?" >> /tmp/s25a3/steps.txt
timeout 120 bash scripts/gpu_cold_jit.sh /tmp/s25a3/jit .dev "72 136 200 320" 3 > /tmp/s25a3/jit.log 2>&1
echo "jit rc=$?" >> /tmp/s25a3/steps.txt
timeout 120 bash bench/stage_ab.sh /tmp/s25a3/ab 3 new=.dev base=.dev-base > /dev/null 2>&1
echo "stage_ab rc=$?" >> /tmp/s25a3/steps.txt
python3 bench/stage_compare.py "/tmp/s25a3/ab/stage_base_r*.jsonl" "/tmp/s25a3/ab/stage_new_r*.jsonl" > /tmp/s25a3/compare.txt 2>&1
python3 bench/results/2026-11-29-session24/a2-kv-in-kernel-prototype-h200/attn_delta.py /tmp/s25a3/ab base new > /tmp/s25a3/attn_delta.txt 2>&1
cp .scratch/s25/a3.sh /tmp/s25a3/run.sh
tar czf $O/a3.tgz -C /tmp s25a3
cat /tmp/s25a3/steps.txt; tail -30 /tmp/s25a3/sb/summary.txt 2>/dev/null; cat /tmp/s25a3/jit/first_call.jsonl | cut -c1-400; cat /tmp/s25a3/compare.txt /tmp/s25a3/attn_delta.txt
