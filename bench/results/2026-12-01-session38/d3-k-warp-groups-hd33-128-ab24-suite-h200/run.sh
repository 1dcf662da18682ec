#!/usr/bin/env bash
# Session 38 d3: quantize_k's warp-group form at head dims 33-128 (with 1c2047e's tidy) against
# f12441c's library (.dev-sb): the quantize stage at the 24 shapes, 3 rounds alternated; the
# `quant` records; the whole C++ GPU suite in 4 shards.
set -u
RUN=d3 bash bench/results/2026-11-30-session36/c2-stats-units-ab24-suite-h200/run.sh
