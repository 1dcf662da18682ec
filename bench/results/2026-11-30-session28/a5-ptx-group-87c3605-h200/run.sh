# cp -r ../shared/anchors/sageattention-ref/source .anchors-ref-mma; carry .dev (87c3605) and .anchors-ref-mma
bash scripts/gpu_ptx_bench.sh $OUT/ptx "$(date -u +%Y-%m-%dT%H:%MZ)-ptx-87c3605"
