#!/usr/bin/env bash
# Session 33 b5: the `ptx` group (issue 41) of ffc728e — the first since session 28's 87c3605, with
# sessions 29-30's kept shared-memory destinations in the mma kernels. Carry .dev (ffc728e) and
# .anchors-ref-mma (cp -r ../shared/anchors/sageattention-ref/source .anchors-ref-mma).
bash scripts/gpu_ptx_bench.sh $OUT/ptx "$(date -u +%Y-%m-%dT%H:%MZ)-ptx-ffc728e"
