#!/usr/bin/env python3
"""Reads trace_probe.py's chrome traces: per timed call, times relative to the timed_call
annotation's start (the CPU just before the start event's record): CPU ops / runtime / driver API
calls (start, duration) and GPU activity (start, duration).
  python3 trace_read.py TRACE.json [calls to show]   (the committed traces: xz -dc X.trace.xz > X.json)"""
import json, sys
t = json.load(open(sys.argv[1]))["traceEvents"]
show = int(sys.argv[2]) if len(sys.argv) > 2 else 2
calls = sorted((e for e in t if e.get("cat") == "user_annotation" and e.get("name") == "timed_call"), key=lambda e: e["ts"])
for c in calls[-show:]:
    t0, t1 = c["ts"], c["ts"] + c["dur"]
    rows = []
    for e in t:
        cat = e.get("cat")
        if cat in ("cpu_op", "cuda_runtime", "cuda_driver") and t0 <= e["ts"] <= t1:
            rows.append((e["ts"] - t0, "cpu", cat, e["name"][:60], e.get("dur", 0)))
        if cat in ("kernel", "gpu_memset", "gpu_memcpy") and t0 <= e["ts"] <= t1 + 2000:
            rows.append((e["ts"] - t0, "GPU", cat, e["name"][:60], e.get("dur", 0)))
    print(f"--- call at {t0:.1f}: annotation {c['dur']:.1f} us")
    for r in sorted(rows):
        print(f"{r[0]:9.1f} {r[1]} {r[2]:12s} {r[4]:8.1f}  {r[3]}")
