OUT=$OUT bash .scratch/s28/ptx_ab.sh   # .dev-base = 3336b36, .dev = 48feebf
