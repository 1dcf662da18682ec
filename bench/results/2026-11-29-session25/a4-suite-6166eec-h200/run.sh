#!/usr/bin/env bash
# Session 25 call a4: the whole C++ GPU suite on 6166eec (the final library code; 4 shards), every
# shard's log in one archive.
set -u
O=$OUT/a4; mkdir -p $O
mkdir -p /tmp/s25a4-suite; timeout 560 bash scripts/gpu_run.sh /tmp/s25a4-suite --bundle .dev --suite "" --shards 4 > /tmp/s25a4-suite/gpu_run.log 2>&1 || true
mkdir -p /tmp/s25a4-suite; cp .scratch/s25/a4.sh /tmp/s25a4-suite/run.sh
tar czf $O/suite.tgz -C /tmp s25a4-suite
tail -30 /tmp/s25a4-suite/gpu_run.log
