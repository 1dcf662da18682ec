#!/usr/bin/env bash
# Session 37 c4: the scoreboard records (e2e / kernel / real / small, with heads) of f12441c (the
# warp-group quantize_k; its whole C++ GPU suite and `quant` records ran in c3) against cuDNN, FA2
# and the reference in the same call: session 35's records script, this tag (.dev-sb: a slim
# bundle of f12441c's build).
set -u
RECORDS_TAG=s37c4 bash bench/results/2026-11-30-session35/c4-records-h200/run.sh
