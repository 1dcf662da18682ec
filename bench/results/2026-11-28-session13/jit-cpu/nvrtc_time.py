"""Times NVRTC on dumped kernel sources (SAGE2_DUMP_DIR .cu files) with option variants.
   python3 nvrtc_time.py ARCH FILE.cu [FILE.cu ...]"""
import ctypes, sys, time, re
nv = ctypes.CDLL("/usr/local/cuda/lib64/libnvrtc.so")
base = ["--include-path=/work/main/templates", "-std=c++17", "-default-device", "--ptxas-options=-v", "-prec-div=true", "-prec-sqrt=true", "-ftz=false"]
VARIANTS = {
    "default": [],
    "Ofast-max": ["--Ofast-compile=max"],
    "Ofast-mid": ["--Ofast-compile=mid"],

}
def compile_one(src, name, arch, extra):
    prog = ctypes.c_void_p()
    r = nv.nvrtcCreateProgram(ctypes.byref(prog), src, name.encode(), 0, None, None)
    assert r == 0, r
    opts = ["--gpu-architecture=" + arch] + base + extra
    arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    t0 = time.perf_counter()
    r = nv.nvrtcCompileProgram(prog, len(opts), arr)
    dt = time.perf_counter() - t0
    n = ctypes.c_size_t()
    nv.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value)
    nv.nvrtcGetProgramLog(prog, log)
    nv.nvrtcDestroyProgram(ctypes.byref(prog))
    text = log.value.decode(errors="replace")
    regs = re.findall(r"Used (\d+) registers", text)
    spill = re.findall(r"(\d+) bytes spill stores", text)
    stack = re.findall(r"(\d+) bytes stack frame", text)
    return r, dt, regs[-1:] , spill[-1:], stack[-1:], text
arch = sys.argv[1]
for f in sys.argv[2:]:
    src = open(f, "rb").read()
    key = open(f[:-3] + ".log", errors="replace").readline().strip()
    print(key[:150])
    for v, extra in VARIANTS.items():
        r, dt, regs, spill, stack, text = compile_one(src, f.split("/")[-1], arch, extra)
        print("  %-10s rc %d  %.2f s  regs %s spill %s stack %s" % (v, r, dt, regs, spill, stack))
        if r != 0: print(text[:500])
