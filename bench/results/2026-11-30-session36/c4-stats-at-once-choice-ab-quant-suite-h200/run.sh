#!/usr/bin/env bash
# Session 36 c4: 48a4059 (channel_stats at once as a launch choice by the head count; .dev its full
# bundle): the quantize stage against 34cc008's library (.dev-sb) at c2's 24 shapes, 3 rounds
# alternated; the `quant` records (3 rounds merged); the whole C++ GPU suite in 4 shards.
set -u
RUN=c4 bash bench/results/2026-11-30-session36/c2-stats-units-ab24-suite-h200/run.sh
