import ctypes, sys, time
exec(open('bench/results/2026-11-29-session17/jit-ofast-leak-cpu/leak.py').read().split("print(")[0].replace("sys.argv[1]", "'bench/results/2026-11-29-session17/jit-ofast-leak-cpu/attn_wgmma_d128_w8s3.cu'"))
def sp(r): return ([l for l in r[1] if 'spill' in l] or [str(r)])[0][-60:]
opt = sys.argv[1:]
t=time.time(); r0=comp([]); d0=time.time()-t
t=time.time(); r=comp(opt); dt=time.time()-t
print(opt, "default %.2f s, option %.2f s rc %d" % (d0, dt, r[0]), sp(r))
print("   then default:", sp(comp([])))
