#!/usr/bin/env bash
# Session 37 c3: the warp-group quantize_k after c2's ncu (f12441c: the k̄ loads of a lane issued
# together, rows loaded unpredicated) against 48a4059's library (.dev-sb): the quantize stage at
# the 24 shapes, 3 rounds alternated; the `quant` records; the whole C++ GPU suite.
set -u
RUN=c3 bash bench/results/2026-11-30-session36/c2-stats-units-ab24-suite-h200/run.sh
