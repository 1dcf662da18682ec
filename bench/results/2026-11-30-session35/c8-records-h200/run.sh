#!/usr/bin/env bash
# Session 35 c8: the scoreboard records (e2e / kernel / real / small, with heads) of 34cc008
# (quantize_v at rows of 12 chunks: 4 lanes x 3; its whole C++ GPU suite and `quant` records ran
# in c7), with .dev-sb rebuilt from 34cc008: c4's script under another tag.
RECORDS_TAG=s35c8 bash "$(dirname "$0")/../c4-records-h200/run.sh"
