bash scripts/gpu_run.sh $OUT/s --bundle .dev --suite "" --shards 4   # .dev = 48feebf
