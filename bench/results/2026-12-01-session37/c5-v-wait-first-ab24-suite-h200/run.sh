#!/usr/bin/env bash
# Session 37 c5 (branch s37-v-wait-first): the split quantize_v kernel waits for the previous
# kernel before it loads its rows (the commit sage2-info reports; .dev its full bundle), against
# f12441c's library (.dev-sb: main's library code): the quantize stage at the 24 shapes, 3 rounds
# alternated; the whole C++ GPU suite.
set -u
RUN=c5 bash bench/results/2026-11-30-session36/c2-stats-units-ab24-suite-h200/run.sh
