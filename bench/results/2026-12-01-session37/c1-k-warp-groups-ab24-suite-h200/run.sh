#!/usr/bin/env bash
# Session 37 c1: the split quantize_k kernel's warp-group form (the commit sage2-info reports; .dev
# its full bundle) against 48a4059's library (.dev-sb, main's library code): the quantize stage at
# session 36 c2's 24 shapes, 3 rounds alternated; the `quant` records; the whole C++ GPU suite.
set -u
RUN=c1 bash bench/results/2026-11-30-session36/c2-stats-units-ab24-suite-h200/run.sh
