OUT=$OUT bash .scratch/s28/ptx_ab.sh   # .dev-base = 3336b36, .dev = 87c3605 (ptx_ab.sh / ptx_ab.py here)
bash scripts/gpu_run.sh $OUT/s --bundle .dev --suite "" --shards 4
