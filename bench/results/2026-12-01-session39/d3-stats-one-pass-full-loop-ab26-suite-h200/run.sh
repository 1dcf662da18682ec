#!/usr/bin/env bash
# Session 39 d3: the one-pass walk with its loop without per-row tests over a sample (the commit
# sage2-info reports) against f12441c's library (.dev-sb): the stage at d1's 26 shapes, 3 rounds
# alternated; the `quant` records; the whole C++ GPU suite in 4 shards.
set -u
RUN=d3 bash bench/results/2026-12-01-session39/d1-stats-one-pass-ab26-suite-h200/run.sh
