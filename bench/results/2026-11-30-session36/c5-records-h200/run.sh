#!/usr/bin/env bash
# Session 36 c5: the scoreboard records (e2e / kernel / real / small, with heads) of 48a4059
# (channel_stats at once by the head count; its whole C++ GPU suite and `quant` records ran in c4)
# against cuDNN, FA2 and the reference in the same call: session 35's records script, this tag
# (.dev-sb: a slim bundle of 48a4059's build).
set -u
RECORDS_TAG=s36c5 bash bench/results/2026-11-30-session35/c4-records-h200/run.sh
