# .dev-base = 3336b36, .dev = 87c3605; the A/B scripts are in ../a2-fused-exp-ptx-ab-h200/ (ptx_ab.sh, ptx_ab.py), run from .scratch/s28/
OUT=$OUT bash .scratch/s28/ptx_ab.sh
bash scripts/gpu_run.sh $OUT/s --bundle .dev --suite "" --shards 4
