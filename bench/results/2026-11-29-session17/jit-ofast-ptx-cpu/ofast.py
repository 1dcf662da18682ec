"""PTX with and without --Ofast-compile=max for one dumped attention source; counts contractible f32 ops."""
import ctypes, re, sys, hashlib, time
nv = ctypes.CDLL("/usr/local/cuda/lib64/libnvrtc.so")
def ptx(src, extra, arch):
    prog = ctypes.c_void_p(); nv.nvrtcCreateProgram(ctypes.byref(prog), src, b"k.cu", 0, None, None)
    opts = ["--gpu-architecture=" + arch, "--include-path=/work/main/templates", "-std=c++17", "-default-device", "-prec-div=true", "-prec-sqrt=true", "-ftz=false"] + extra
    arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    t = time.time(); r = nv.nvrtcCompileProgram(prog, len(opts), arr); dt = time.time() - t
    if r:
        n = ctypes.c_size_t(); nv.nvrtcGetProgramLogSize(prog, ctypes.byref(n)); log = ctypes.create_string_buffer(n.value); nv.nvrtcGetProgramLog(prog, log)
        return "ERR %d %s" % (r, log.value[:500]), dt
    n = ctypes.c_size_t(); nv.nvrtcGetPTXSize(prog, ctypes.byref(n)); b = ctypes.create_string_buffer(n.value); nv.nvrtcGetPTX(prog, b)
    return b.value.decode(), dt
src = open(sys.argv[1], "rb").read(); arch = sys.argv[2]
a, ta = ptx(src, [], arch); b, tb = ptx(src, ["--Ofast-compile=max"], arch)
norm = lambda t: re.sub(r"%(r|rd|f|fd|p|rs|h|hh)(\d+)", "%v", t)
print("ptx-only compile s: default %.2f  ofast-max %.2f" % (ta, tb))
print("PTX identical (registers renamed):", norm(a) == norm(b), len(a), len(b))
for name, t in (("default", a), ("ofast", b)):
    print(name, "mul.f32 (no .rn):", len(re.findall(r"\bmul\.f32\b", t)), "add.f32:", len(re.findall(r"\badd\.f32\b", t)),
          "fma.rn.f32:", len(re.findall(r"\bfma\.rn\.f32\b", t)), "mul.rn.f32:", len(re.findall(r"\bmul\.rn\.f32\b", t)))
