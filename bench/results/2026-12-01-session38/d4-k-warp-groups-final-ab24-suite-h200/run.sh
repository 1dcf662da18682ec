#!/usr/bin/env bash
# Session 38 d4: quantize_k's warp-group form at head dims 33-128, the hd 64 / 128 k̄ rows back in a
# static array (the commit sage2-info reports), against f12441c's library (.dev-sb): the quantize
# stage at the 24 shapes, 3 rounds alternated; the `quant` records; the whole C++ GPU suite.
set -u
RUN=d4 bash bench/results/2026-11-30-session36/c2-stats-units-ab24-suite-h200/run.sh
